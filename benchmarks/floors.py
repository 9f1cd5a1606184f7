"""Floors: what the hardware and RocksDB do with no compactlog code in the way.

Every figure the suite reports stands beside one of these, measured in the same run on
the same disk, so a reader sees how far the server is from the machine rather than an
absolute number that only means something on our hardware.

- ``io_floor``: sequential file write (+ one fsync) and read in 1 MiB chunks: what the
  LogCleaner and the segmented log cannot beat.
- raw RocksDB (batched write, full scan, one synced put) lives in ``bench_server.py``
  (``rocksdb_floor``), which the suite reuses.
- ``two_phase_floor``: one scan of a topic's key blocks, one of its entries and a batched
  write of the winners: the least work any compaction of a LEDGER topic must do.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

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
