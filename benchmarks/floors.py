"""Floors: what the hardware and RocksDB do with no compactlog code in the way.

Every figure the suite reports stands beside one of these, measured in the same run on
the same disk, so a reader sees how far the server is from the machine rather than an
absolute number that only means something on our hardware.

- ``io_floor``: sequential file write (+ one fsync) and read in 1 MiB chunks: what the
  LogCleaner and the segmented log cannot beat.
- ``file_floors``: the same reads over a topic's own files (segments, or the RocksDB
  files of a ledger store) three ways: as they lie in the page cache (warm), after
  ``posix_fadvise(DONTNEED)`` dropped them (cold; on a VM the host may still cache), and
  the raw copy loop (read + write of the same bytes + fsync), what a rewrite must do.
- raw RocksDB (batched write, full scan, one synced put) lives in ``bench_server.py``
  (``rocksdb_floor``), which the suite reuses.
- ``two_phase_floor``: one scan of a topic's key blocks, one of its entries and a batched
  write of the winners: the least work any compaction of a LEDGER topic must do.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO

from compactlog.storage import keys
from compactlog.storage.codec import ROLE_COMPACTED
from compactlog.storage.ledger_store import LedgerStore
from compactlog.storage.rocks import Batch

CHUNK = 1 << 20


def io_floor(directory: Path, nbytes: int) -> tuple[float, float]:
    """Seconds to write (with fsync) and read back ``nbytes`` sequentially in 1 MiB chunks."""
    path = directory / "floor.bin"
    chunk = os.urandom(CHUNK)
    t0 = time.perf_counter()
    with open(path, "wb") as fh:
        for _ in range(max(1, nbytes // CHUNK)):
            fh.write(chunk)
        fh.flush()
        os.fsync(fh.fileno())
    t1 = time.perf_counter()
    with open(path, "rb") as fh:
        while fh.read(CHUNK):
            pass
    t2 = time.perf_counter()
    path.unlink()
    return t1 - t0, t2 - t1


def _read_all(paths: Sequence[Path], sink: BinaryIO | None = None) -> int:
    moved = 0
    for path in paths:
        try:
            with open(path, "rb", buffering=0) as fh:
                while chunk := fh.read(CHUNK):
                    moved += len(chunk)
                    if sink is not None:
                        sink.write(chunk)
        except FileNotFoundError:  # RocksDB compacted it away meanwhile
            continue
    return moved


def _drop_cached(paths: Sequence[Path]) -> None:
    for path in paths:
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            continue
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def file_floors(paths: Sequence[Path], scratch: Path) -> dict[str, float]:
    """Bytes/s of a warm read, a copy loop and a cold read of ``paths`` (module docstring),
    in that order: the cold read leaves the files cached again, as it found them."""
    t0 = time.perf_counter()
    moved = _read_all(paths)
    t1 = time.perf_counter()
    target = scratch / "floor-copy.bin"
    with open(target, "wb") as out:
        _read_all(paths, out)
        out.flush()
        os.fsync(out.fileno())
    t2 = time.perf_counter()
    target.unlink()
    _drop_cached(paths)
    t3 = time.perf_counter()
    _read_all(paths)
    t4 = time.perf_counter()
    moved = max(moved, 1)
    return {
        "bytes": float(moved),
        "warm_read_bps": moved / max(t1 - t0, 1e-9),
        "copy_bps": moved / max(t2 - t1, 1e-9),
        "cold_read_bps": moved / max(t4 - t3, 1e-9),
    }


def io_floor_rates(directory: Path, nbytes: int) -> dict[str, float]:
    """``io_floor`` as bytes per second (the chunk count rounds ``nbytes`` down to MiB)."""
    moved = max(1, nbytes // CHUNK) * CHUNK
    write_s, read_s = io_floor(directory, nbytes)
    return {"file_write_bps": moved / write_s, "file_read_bps": moved / read_s}


def two_phase_floor(store: LedgerStore, topic: str, winners: int) -> tuple[float, float, float]:
    """Seconds for raw RocksDB work of the same size as a compaction: a scan of the
    topic's stored batches (phase one), another (phase two), and a batched write of the
    winners' share of those bytes into a scratch range (deleted afterwards)."""
    meta = store.topic(topic).ledgers
    total = sum(led.entries for led in meta) or 1
    t0 = time.perf_counter()
    for led in meta:
        for _key, _value in store.db.scan(*keys.ledger_range(led.ledger_id)):
            pass
    t1 = time.perf_counter()
    sample: list[bytes] = []
    for led in meta:
        for _key, value in store.db.scan(*keys.ledger_range(led.ledger_id)):
            sample.append(value[: max(1, len(value) * winners // total)])
    t2 = time.perf_counter()
    scratch = store.create_ledger(topic, ROLE_COMPACTED).ledger_id
    out = Batch()
    for i, value in enumerate(sample):
        out.put(keys.entry_key(scratch, i), value)
    store.db.write(out)
    t3 = time.perf_counter()
    store.delete_ledger(scratch)
    return t1 - t0, t2 - t1, t3 - t2
