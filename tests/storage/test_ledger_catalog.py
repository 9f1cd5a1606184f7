"""The LEDGER catalog beside the store: it never lists more than the store holds, so a
delete the disk refuses changes nothing, and a start after faults, retention or a crash
raises no false alarm; a store that lost a topic, a ledger or entries the catalog lists is
not opened (the MANIFEST, WAL and SST cases are cut for real in
tests/e2e/test_manifest_cut.py and tests/e2e/test_truncation_matrix.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from compactlog.errors import CorruptData, DiskFull
from compactlog.storage import keys
from compactlog.storage.config import ServerSettings
from compactlog.storage.ledger_catalog import catalog_path
from compactlog.storage.ledger_store import LEDGER_ID_BLOCK, LedgerStore
from compactlog.storage.rocks import Batch
from compactlog.storage.types import Record

SETTINGS = ServerSettings(topic_defaults={})


def test_a_delete_the_disk_refuses_changes_nothing(small_disk) -> None:  # type: ignore[no-untyped-def]
    disk = small_disk(64 << 20)
    path = disk.path / "ledgers"
    store = LedgerStore(path, SETTINGS)
    store.create_topic("a", {})
    store.create_topic("b", {})
    disk.fill(leave=0)
    with pytest.raises(DiskFull) as refused:  # the catalog goes first, and cannot
        store.delete_topic("a")
    assert refused.value.metadata["path"].endswith(".catalog")
    assert sorted(store.topic_names()) == ["a", "b"]
    disk.free()
    store.delete_topic("a")
    store.close()
    store = LedgerStore(path, SETTINGS)  # no false alarm: the catalog is the store's
    assert store.topic_names() == ["b"]
    store.close()


def test_a_store_without_a_listed_topic_is_not_opened(tmp_path: Path) -> None:
    path = tmp_path / "ledgers"
    store = LedgerStore(path, SETTINGS)
    store.create_topic("a", {})
    store.close()
    before = catalog_path(path).read_bytes()
    shutil.rmtree(path)  # the store lost everything; the catalog still lists "a"
    path.mkdir()
    with pytest.raises(CorruptData, match="opened without what its catalog lists \\(topic a\\)"):
        LedgerStore(path, SETTINGS)
    assert catalog_path(path).read_bytes() == before  # nothing rewritten or deleted


def records(n: int) -> list[Record]:
    return [Record(key=b"k%d" % i, value=b"v%d" % i) for i in range(n)]


def test_a_store_that_went_back_in_time_is_not_opened(tmp_path: Path) -> None:
    """A store that opens as it was earlier (a lost flush, a lost WAL): the topic is still
    there, but a ledger and entries of it are gone."""
    path = tmp_path / "ledgers"
    store = LedgerStore(path, SETTINGS)
    store.create_topic("a", {"ledger.max.entries": "4"})
    store.append("a", records(3))
    store.close()
    earlier = tmp_path / "earlier"
    shutil.copytree(path, earlier)
    store = LedgerStore(path, SETTINGS)  # ledger 1 sealed at 3 entries; ledger 2 new
    store.append("a", records(6))
    store.close()
    before = catalog_path(path).read_bytes()
    shutil.rmtree(path)
    earlier.rename(path)
    with pytest.raises(CorruptData) as refused:
        LedgerStore(path, SETTINGS)
    assert "ledgers 2 to 3 (ids allocated, unknown to the store)" in str(refused.value)
    assert "ledger 2 of topic a" in str(refused.value)
    assert catalog_path(path).read_bytes() == before  # nothing rewritten or deleted


def test_a_ledger_whose_entries_are_gone_is_named(tmp_path: Path) -> None:
    path = tmp_path / "ledgers"
    store = LedgerStore(path, SETTINGS)
    store.create_topic("a", {})
    store.append("a", records(5))
    (ledger,) = store.topic("a").ledgers
    gone = Batch()
    gone.delete_range(*keys.ledger_range(ledger.ledger_id))  # an SST of entries lost
    store.db.write(gone, sync=True)
    store.close()
    with pytest.raises(CorruptData, match=f"the 5 entries of ledger {ledger.ledger_id} of topic a"):
        LedgerStore(path, SETTINGS)


def test_a_crash_and_retention_raise_no_false_alarm(tmp_path: Path) -> None:
    path = tmp_path / "ledgers"
    store = LedgerStore(path, SETTINGS)
    store.create_topic("a", {"ledger.max.entries": "2", "retention.bytes": "1"})
    store.append("a", records(7))  # ledgers 1 to 4
    assert store.enforce_retention("a") == [1, 2, 3]
    store.close()
    store = LedgerStore(path, SETTINGS)
    store.append("a", records(1))  # a fifth ledger, allocated after the start
    assert [led.ledger_id for led in store.topic("a").ledgers] == [4, 5]
    store.close()
    store = LedgerStore(path, SETTINGS)
    assert store.topic("a").ledgers[-1].entries == 1
    store.close()


def test_ledger_rolls_within_a_reserved_block_sync_nothing_more(tmp_path: Path) -> None:
    """A roll takes its id from the block reserved by one synced write (the allocator and
    the catalog written once for LEDGER_ID_BLOCK ledgers, not once a ledger); a clean stop
    gives back what it did not hand out, a crash skips it, and no id is ever reused."""
    path = tmp_path / "ledgers"
    store = LedgerStore(path, SETTINGS)
    store.create_topic("a", {"ledger.max.entries": "2"})
    store.append("a", records(1))  # ledger 1: ids 1 to LEDGER_ID_BLOCK reserved
    catalog = catalog_path(path).read_bytes()
    store.append("a", records(9))  # ledgers 2 to 5
    assert [led.ledger_id for led in store.topic("a").ledgers] == [1, 2, 3, 4, 5]
    assert catalog_path(path).read_bytes() == catalog  # not rewritten by the rolls
    stored = store.db.get(keys.NEXT_LEDGER_KEY)
    assert stored is not None and keys.U64.unpack(stored)[0] == 1 + LEDGER_ID_BLOCK
    store.close()  # a clean stop: ids 6 to LEDGER_ID_BLOCK given back
    store = LedgerStore(path, SETTINGS)
    store.append("a", records(2))
    assert [led.ledger_id for led in store.topic("a").ledgers][-1] == 6
    crashed = tmp_path / "crashed"
    shutil.copytree(path, crashed)  # the store's files as a crash would leave them
    store.close()
    store = LedgerStore(crashed, SETTINGS)  # no false alarm, and no id of the block reused
    store.append("a", records(2))
    assert [led.ledger_id for led in store.topic("a").ledgers][-1] == 6 + LEDGER_ID_BLOCK
    store.close()


def test_a_full_disk_at_the_stop_keeps_the_reserved_ids(  # type: ignore[no-untyped-def]
    small_disk, caplog: pytest.LogCaptureFixture
) -> None:
    """Giving the unused ids back is the clean stop's one new write: with no room for the
    catalog (lowered first) the store keeps its whole block, the stop goes on, and the
    next start opens without a false alarm and hands out the id after the block."""
    disk = small_disk(64 << 20)
    path = disk.path / "ledgers"
    store = LedgerStore(path, SETTINGS)
    store.create_topic("a", {"ledger.max.entries": "2"})
    store.append("a", records(3))  # ledgers 1 and 2 of the block reserved by the first
    catalog = catalog_path(path).read_bytes()
    store.db.flush()  # the close itself then has nothing to write
    disk.fill(leave=0)
    store.close()  # the catalog cannot be lowered: nothing given back, nothing partial
    assert "reserved ledger ids kept" in caplog.text and "ENOSPC" in caplog.text
    assert catalog_path(path).read_bytes() == catalog
    assert not list(path.parent.glob("*.tmp")) and not list(path.glob("*.tmp"))
    disk.free()
    store = LedgerStore(path, SETTINGS)
    store.append("a", records(2))
    assert [led.ledger_id for led in store.topic("a").ledgers] == [1, 2, 1 + LEDGER_ID_BLOCK]
    store.close()
