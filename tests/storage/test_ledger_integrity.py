"""The ledger store trusts nothing read back (CONTRACT section 11) — a real RocksDB.

A damaged table block is ``CorruptData``, never a scan that ends short; a damaged WAL
stops the open instead of dropping acknowledged writes; a topic whose metadata fails
validation goes offline alone, and the orphan collector keeps every ledger it cannot
prove nobody's.
"""

from __future__ import annotations

import gc
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from compactlog.errors import CorruptData, StoreLocked
from compactlog.storage import keys
from compactlog.storage.config import ServerSettings
from compactlog.storage.cursor import COMPACTION_SUBSCRIPTION
from compactlog.storage.ledger_store import LedgerStore
from compactlog.storage.rocks import Batch, RocksDB
from compactlog.storage.types import MessageId, Record
from compactlog.storage.views import view_messages

SETTINGS = ServerSettings(topic_defaults={})
FIRST, LAST = MessageId(0, 0), MessageId(2**63, 0)


def flip(path: Path, position: int) -> None:
    data = bytearray(path.read_bytes())
    data[position] ^= 0xFF
    path.write_bytes(bytes(data))


def reopen(path: Path) -> LedgerStore:
    gc.collect()
    return LedgerStore(path, SETTINGS)


@pytest.fixture
def db_path(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "db"
    gc.collect()


def fill(path: Path, topics: tuple[str, ...] = ("a", "b"), n: int = 300) -> LedgerStore:
    store = LedgerStore(path, SETTINGS)
    for name in topics:
        store.create_topic(name, {"ledger.max.entries": "100"})
        for i in range(0, n, 3):
            store.append(
                name, [Record(b"k%d" % (j % 7), bytes(200) + b"%d" % j) for j in range(i, i + 3)]
            )
    return store


def raw(store: LedgerStore, topic: str) -> list[MessageId]:
    return [m.id for m in view_messages(store, topic, FIRST, LAST, compacted=False)]


def test_a_damaged_table_block_fails_the_scan_instead_of_ending_it(tmp_path: Path) -> None:
    db = RocksDB(tmp_path / "db")
    batch = Batch()
    for i in range(5000):
        batch.put(b"E%08d" % i, bytes(100) + b"%d" % i)
    db.write(batch)
    db.flush()
    db.close()
    sst = next((tmp_path / "db").glob("*.sst"))
    flip(sst, sst.stat().st_size // 3)
    db = RocksDB(tmp_path / "db")
    with pytest.raises(CorruptData, match="Corruption"):
        sum(1 for _ in db.scan(b"E", b"F"))  # rocksdict's own items() stops short here
    with pytest.raises(CorruptData):
        list(db.scan_reverse(b"E", b"F"))
    db.close()


def test_a_damaged_block_of_ledger_entries_is_corrupt_data_naming_the_topic(
    db_path: Path,
) -> None:
    store = fill(db_path)
    store.db.flush()
    store.close()
    sst = max(db_path.glob("*.sst"), key=lambda p: p.stat().st_size)  # the entries' table
    flip(sst, sst.stat().st_size // 2)  # the entries are the bulk of the table
    store = reopen(db_path)
    with pytest.raises(CorruptData, match=r"topic '[ab]' ledger"):
        raw(store, "a") and raw(store, "b")
    store.close()


def test_a_damaged_wal_stops_the_open_rather_than_drop_acknowledged_writes(
    db_path: Path, tmp_path: Path
) -> None:
    store = fill(db_path, topics=("a",), n=60)
    crash = tmp_path / "crash"
    shutil.copytree(db_path, crash)  # the files as a crash would leave them: all in the WAL
    store.close()
    wal = max(crash.glob("*.log"), key=lambda p: p.stat().st_size)
    flip(wal, wal.stat().st_size // 3)
    (crash / "LOCK").unlink()
    with pytest.raises(CorruptData, match="damaged and was not opened") as info:
        LedgerStore(crash, SETTINGS)
    assert "\n" not in str(info.value)
    gc.collect()
    lossy = ServerSettings(topic_defaults={}, ledger_wal_recovery_mode="point-in-time")
    store = LedgerStore(crash, lossy)  # the operator's choice: keep what precedes the damage
    assert len(raw(store, "a")) < 60
    store.close()


def test_a_damaged_table_read_at_open_is_damage_not_a_held_lock(db_path: Path) -> None:
    """A checksum failure in a table the open reads ("block checksum mismatch") is
    CorruptData; it was StoreLocked, "in use by another process", because "block" holds
    "lock". The clean stop's last write (the ledger ids given back) is the smallest table."""
    store = fill(db_path)
    store.db.flush()
    store.close()
    sst = min(db_path.glob("*.sst"), key=lambda p: p.stat().st_size)
    flip(sst, sst.stat().st_size // 3)
    with pytest.raises(CorruptData, match="damaged and was not opened"):
        reopen(db_path)


def test_a_store_held_elsewhere_is_locked(db_path: Path) -> None:
    store = fill(db_path, topics=("a",), n=3)
    try:
        with pytest.raises(StoreLocked, match="in use by another process"):
            LedgerStore(db_path, SETTINGS)
    finally:
        store.close()


def test_a_malformed_topic_record_takes_only_that_topic_offline(db_path: Path) -> None:
    store = fill(db_path)
    ledgers_of_a = [led.ledger_id for led in store.topic("a").ledgers]
    store.close()
    db = RocksDB(db_path)
    db.put(keys.topic_key("a"), b'{"kind": 1, "overrides": {}, "ledgers": [1, 2')
    db.close()
    store = reopen(db_path)
    assert "a" in store.offline_topics() and "topic record" in store.offline_topics()["a"].reason
    assert store.has_topic("a") and store.topic_names() == ["b"]
    with pytest.raises(CorruptData, match="offline"):
        store.topic("a")
    assert all(store.ledger(lid) is not None for lid in ledgers_of_a)  # not orphans
    assert len(raw(store, "b")) == 300
    store.close()
    store = reopen(db_path)  # and again: offline state is not "repaired" by a restart
    assert all(store.ledger(lid) is not None for lid in ledgers_of_a)
    store.delete_topic("a")  # the operator gives up on it
    assert not store.has_topic("a") and all(store.ledger(lid) is None for lid in ledgers_of_a)
    store.close()


def test_a_malformed_compaction_cursor_keeps_the_compacted_ledger(db_path: Path) -> None:
    store = fill(db_path, topics=("a",))
    compacted = store.create_ledger("a")
    store.seal_ledger(compacted.ledger_id)
    store.commit_cursor(
        "a",
        COMPACTION_SUBSCRIPTION,
        MessageId(1, 5),
        {"CompactedTopicLedger": str(compacted.ledger_id)},
    )
    store.close()
    db = RocksDB(db_path)
    db.put(keys.cursor_key("a", COMPACTION_SUBSCRIPTION), b'{"mark_delete": [1, 5], "acked": []}')
    db.close()
    store = reopen(db_path)
    assert "cursor" in store.offline_topics()["a"].reason
    assert store.ledger(compacted.ledger_id) is not None  # unreadable reference: kept
    store.close()


def test_a_topic_listing_a_ledger_without_meta_goes_offline(db_path: Path) -> None:
    store = fill(db_path)
    lid = store.topic("a").ledgers[1].ledger_id
    store.close()
    db = RocksDB(db_path)
    db.put(keys.ledger_meta_key(lid), b"\x01")  # a meta that does not decode
    db.close()
    store = reopen(db_path)
    assert f"meta of ledger {lid}" in store.offline_topics()["a"].reason
    assert len(raw(store, "b")) == 300
    store.close()


def test_orphans_are_still_collected_when_provably_nobodys(db_path: Path) -> None:
    store = fill(db_path, topics=("a",), n=30)
    orphan = store.create_ledger("a")  # an interrupted compaction's output
    store.close()
    store = reopen(db_path)
    assert store.ledger(orphan.ledger_id) is None
    store.close()


def test_a_malformed_status_blob_is_set_aside(db_path: Path) -> None:
    store = fill(db_path, topics=("a",), n=3)
    store.db.put(keys.status_key("a"), b"{not json")
    assert store.get_status("a") is None
    assert store.db.get(keys.status_key("a")) is None
    kept = list(store.db.scan(b"B", b"C"))
    assert len(kept) == 1 and kept[0][1] == b"{not json"
    store.close()
