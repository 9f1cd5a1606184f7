"""The rocksdict wrapper: bounded scans both ways, errors as our own types."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from compactlog.errors import StoreClosed, StoreLocked
from compactlog.storage.rocks import Batch, RocksDB


@pytest.fixture
def db(tmp_path: Path):  # type: ignore[no-untyped-def]
    store = RocksDB(tmp_path / "db")
    batch = Batch()
    for key in (b"a", b"b1", b"b2", b"b3", b"c"):
        batch.put(key, key.upper())
    store.write(batch)
    yield store
    store.close()


def test_scans_are_bounded_on_both_sides_in_both_directions(db: RocksDB) -> None:
    assert [k for k, _ in db.scan(b"b", b"c")] == [b"b1", b"b2", b"b3"]
    # rocksdict's backwards iteration ignores the lower bound; the wrapper must not
    assert [k for k, _ in db.scan_reverse(b"b", b"c")] == [b"b3", b"b2", b"b1"]
    assert [k for k, _ in db.scan_reverse(b"b2", b"b3")] == [b"b2"]
    assert list(db.scan_reverse(b"x", b"z")) == []
    assert db.last_key(b"b", b"b3") == b"b2"
    assert db.last_key(b"d", b"z") is None


def test_batch_delete_range_and_reopen_releases_the_lock(tmp_path: Path) -> None:
    path = tmp_path / "db"
    db = RocksDB(path)
    with pytest.raises(StoreLocked):
        RocksDB(path)
    batch = Batch()
    batch.put(b"k1", b"v")
    batch.put(b"k2", b"v")
    batch.delete_range(b"k1", b"k2")
    db.write(batch, sync=True)
    db.close()
    gc.collect()
    with pytest.raises(StoreClosed):
        db.get(b"k2")
    again = RocksDB(path)
    assert again.get(b"k1") is None and again.get(b"k2") == b"v"
    again.close()
