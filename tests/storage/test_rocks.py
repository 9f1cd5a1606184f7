"""The rocksdict wrapper: bounded scans both ways, errors as our own types."""

from __future__ import annotations

import gc
import re
from pathlib import Path

import pytest

from compactlog.errors import DiskFull, StorageError, StorageUnavailable, StoreClosed, StoreLocked
from compactlog.storage import file_limits
from compactlog.storage.rocks import Batch, RocksDB
from compactlog.storage.rocks_errors import wrap_error
from compactlog.storage.rocks_secondary import SecondaryRocksDB, SstWriter


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


def test_close_releases_a_store_an_iterator_in_a_cycle_still_holds(tmp_path: Path) -> None:
    """A scan left in a reference cycle keeps the store open until collected: close
    collects it then, and only then (a full collection costs a large process tens of
    milliseconds per close)."""
    path = tmp_path / "db"
    db = RocksDB(path)
    db.put(b"k", b"v")
    gc.disable()  # no automatic collection in between
    try:
        collections = gc.get_stats()[2]["collections"]
        db.close()
        assert gc.get_stats()[2]["collections"] == collections  # nothing held it: none
    finally:
        gc.enable()
    assert not file_limits.holds_under(path)
    db = RocksDB(path)
    scan = db.scan(b"", b"\xff")
    assert next(scan) == (b"k", b"v")
    cycle: list[object] = [scan]
    cycle.append(cycle)
    del scan, cycle
    db.close()
    assert gc.get_stats()[2]["collections"] > collections
    assert not file_limits.holds_under(path)
    RocksDB(path).close()  # the LOCK is free


def test_a_secondary_sees_the_primary_as_of_its_last_catch_up(tmp_path: Path) -> None:
    primary = RocksDB(tmp_path / "db")
    primary.put(b"a", b"1")  # in the WAL only: no flush has happened
    secondary = SecondaryRocksDB(tmp_path / "db", tmp_path / "secondary")
    try:
        assert secondary.get(b"a") == b"1"
        primary.put(b"b", b"2")
        assert secondary.get(b"b") is None
        secondary.catch_up()
        assert [k for k, _ in secondary.scan(b"a", b"z")] == [b"a", b"b"]
        with pytest.raises(AttributeError):
            secondary.write  # type: ignore[attr-defined]  # noqa: B018 - read only
    finally:
        secondary.close()
        primary.close()
        gc.collect()


def test_an_sst_file_is_ingested_whole_and_moved(tmp_path: Path) -> None:
    db = RocksDB(tmp_path / "db")
    db.put(b"z", b"memtable")
    sst = tmp_path / "new.sst"
    writer = SstWriter(sst)
    for i in range(100):
        writer.put(b"k%03d" % i, b"v%d" % i)
    assert writer.finish() > 0
    db.ingest(sst)
    assert not sst.exists()  # moved into the store, not copied
    assert len(list(db.scan(b"k", b"l"))) == 100 and db.get(b"k042") == b"v42"
    bad = SstWriter(tmp_path / "bad.sst")
    bad.put(b"b", b"1")
    with pytest.raises(StorageError):
        bad.put(b"a", b"1")  # keys must ascend
    db.close()
    gc.collect()


def test_an_sst_file_written_back_in_pieces_is_the_same_file(tmp_path: Path, db: RocksDB) -> None:
    """``bytes_per_sync`` only starts writeback early (sync_file_range): a file of the same
    size that ingests the same."""
    files = []
    for name, per_sync in (("whole.sst", 0), ("pieces.sst", 4096)):
        writer = SstWriter(tmp_path / name, per_sync)
        for i in range(2000):
            writer.put(b"E%08d" % i, b"v%d" % i * 20)
        writer.finish()
        files.append((tmp_path / name).read_bytes())
    assert len(files[0]) == len(files[1]) > 4096 * 4
    db.ingest(tmp_path / "pieces.sst")
    assert db.get(b"E00001999") == b"v1999" * 20


@pytest.mark.parametrize(
    ("text", "kind", "errno"),
    [
        (
            "IO error: No space left on device: While appending to file: x/000004.log",
            DiskFull,
            "ENOSPC",
        ),
        (
            "IO error: while link file to x/000022.sst: y/ledger-85.sst: Permission denied",
            StorageUnavailable,
            "EACCES",
        ),
        (
            "IO error: While open a file for appending: x/LOG: Read-only file system",
            StorageUnavailable,
            "EROFS",
        ),
        ("IO error: Input/output error", StorageUnavailable, "EIO"),
    ],
)
def test_an_io_error_names_its_cause(text: str, kind: type, errno: str) -> None:
    """RocksDB's status text carries strerror(): the reason and errno come from it."""
    error = wrap_error(Exception(text), "ingesting", "/data/ledgers")
    assert isinstance(error, kind)
    assert error.metadata == {"path": "/data/ledgers", "errno": errno}
    assert errno in str(error) or kind is DiskFull  # "No space left on device" says it


def _compression_of(sst: Path) -> bytes:
    """The compression a table file names in its properties block: the value of
    ``rocksdb.compression``, whose name is stored after the part it shares with the
    property before it (``rocksdb.comparator``), so as ``...ression<name>``."""
    found = re.search(rb"ression(LZ4|Snappy|NoCompression|ZSTD|Zlib|BZip2)", sst.read_bytes())
    assert found is not None, sst
    return found.group(1)


def test_the_store_and_a_workers_tables_are_lz4_compressed(tmp_path: Path) -> None:
    # LZ4 decompresses several times faster than the default Snappy: every Read and
    # both phases of a run decompress each block they read (storage.rocks_options.table_options)
    db = RocksDB(tmp_path / "store")
    for i in range(2000):
        db.put(b"k%05d" % i, b"value %d " % i * 20)
    db.flush()
    (flushed,) = (tmp_path / "store").glob("*.sst")
    assert _compression_of(flushed) == b"LZ4"
    db.close()
    writer = SstWriter(tmp_path / "run.sst")
    for i in range(2000):
        writer.put(b"k%05d" % i, b"value %d " % i * 20)
    writer.finish()
    assert _compression_of(tmp_path / "run.sst") == b"LZ4"


def test_a_store_written_with_snappy_reads_on_beside_its_new_lz4_tables(tmp_path: Path) -> None:
    from rocksdict import DBCompressionType, Options, Rdict

    old_opts = Options(raw_mode=True)
    old_opts.create_if_missing(True)
    old_opts.set_compression_type(DBCompressionType.snappy())
    old = Rdict(str(tmp_path / "store"), old_opts)
    for i in range(1000):
        old[b"a%05d" % i] = b"old %d " % i * 20
    old.flush()
    old.close()
    db = RocksDB(tmp_path / "store")
    for i in range(1000):
        db.put(b"b%05d" % i, b"new %d " % i * 20)
    db.flush()
    names = sorted(_compression_of(sst) for sst in (tmp_path / "store").glob("*.sst"))
    assert names == [b"LZ4", b"Snappy"]
    rows = list(db.scan(b"a", b"c"))
    assert len(rows) == 2000
    assert rows[0] == (b"a00000", b"old 0 " * 20) and rows[-1] == (b"b00999", b"new 999 " * 20)
    db.close()
