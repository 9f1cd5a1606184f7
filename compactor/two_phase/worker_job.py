"""A TwoPhaseCompactor run in a compaction worker: its storage, and the job shipped there.

The server fixes the input (``LedgerStoreCompactionStorage.begin``) and allocates the new
ledger's id, then ships ``LedgerCompactionJob``. In the worker the unchanged
``TwoPhaseCompactor.compact`` runs over ``WorkerCompactionStorage``:

    begin      the server's input (the secondary caught up to its horizon first)
    reads      checked batches through a secondary instance of the server's store
    append     COMPACTED batches into an SST file (keys ``E ledger position``, ascending)
               and their key digests into a second one (``D ledger position``,
               ``ledger_digests``), ingested with it
    seal       the SST files finished (synced)
    commit     a request: the server ingests the file, seals the ledger with its counts
               and commits the cursor in one synced write (CommitConflict etc. come back)
    delete     of the previous ledger: a request; of its own: the SST file goes

so every fault point of the compactor fires in the worker at its own step, and a worker
killed at any of them leaves the server with an uncommitted ledger to delete, or a
committed one. The compactor reports its progress and checks for a cancel through the
worker's link (a ``RunControl``); every stored batch read and every append passes the
``log.cleaner.io.max.bytes.per.second`` throttle, whose sleeps a cancel cuts short.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from compactlog.compactor.throttle import Throttler, sleep_checking
from compactlog.compactor.two_phase.compactor import CompactionResult, TwoPhaseCompactor
from compactlog.compactor.two_phase.faults import fault_from_env
from compactlog.compactor.two_phase.ledger_adapter import LedgerReads
from compactlog.compactor.two_phase.ledger_digests import digests_sst, key_digests, packed_digests
from compactlog.compactor.two_phase.phase_one import find_winners
from compactlog.compactor.two_phase.storage import (
    CompactionInput,
    NewEntry,
)
from compactlog.compactor.worker_link import WorkerLink, kill_self
from compactlog.errors import CompactlogError, StorageError
from compactlog.storage import keys
from compactlog.storage.compacted_digests import digest_record
from compactlog.storage.ledger_append import compacted_batch, compacted_records_batch, live_only
from compactlog.storage.ledger_scans import StoredBatch
from compactlog.storage.ledger_secondary import SecondaryLedgerScans
from compactlog.storage.rocks_secondary import SstWriter
from compactlog.storage.types import MessageId

METER_BATCHES = 64  # stored batches between progress reports and cancel checks
SST_BYTES_PER_SYNC = 1 << 20  # the SST file's writeback in 1 MiB pieces (SstWriter)


@dataclass(frozen=True)
class CommitLedger:
    """Worker → server: ingest the SST file (None: the ledger is empty), seal, commit."""

    ledger_id: int
    sst: str | None
    entries: int
    bytes: int
    horizon: MessageId  # the run's: phase one may have cut the input short
    digests_sst: str | None = None  # the batches' digest records, ingested with ``sst``


@dataclass(frozen=True)
class DeleteLedger:
    """Worker → server: delete the previous compacted ledger after the commit."""

    ledger_id: int


class RunMeter:
    """The ``log.cleaner.io.max.bytes.per.second`` throttle of one run, fed per stored batch
    read and per append (progress and cancel checks are the compactor's own)."""

    def __init__(self, throttler: Throttler) -> None:
        self.throttler = throttler

    def batch(self, nbytes: int, count: int) -> None:
        self.throttler.maybe_throttle(nbytes)

    def wrote(self, count: int, nbytes: int) -> None:
        self.throttler.maybe_throttle(nbytes)


class MeteredScans(SecondaryLedgerScans):
    """The secondary's checked scans, each batch counted by the run's meter."""

    meter: RunMeter

    def batches(
        self, ledger_id: int, first: int = 0, last: int = keys.MAX_ID
    ) -> Iterator[StoredBatch]:
        batch = self.meter.batch
        for item in super().batches(ledger_id, first, last):
            batch(len(item[1]), item[2].count)
            yield item

    def batches_reversed(self, ledger_id: int, first: int, last: int) -> Iterator[StoredBatch]:
        batch = self.meter.batch
        for item in super().batches_reversed(ledger_id, first, last):
            batch(len(item[1]), item[2].count)
            yield item


class WorkerCompactionStorage(LedgerReads):
    """``CompactionStorage`` of a run in a worker (see the module docstring)."""

    def __init__(self, scans: MeteredScans, job: LedgerCompactionJob, link: WorkerLink) -> None:
        super().__init__(scans, in_server=False)
        self.job, self.link, self.meter = job, link, scans.meter
        self.sst: SstWriter | None = None
        self.digests: SstWriter | None = None
        self.entries = self.bytes = 0

    def begin(self, topic: str) -> CompactionInput:
        if topic != self.job.input.topic:
            raise StorageError(f"the worker was sent {self.job.input.topic!r}, not {topic!r}")
        return self.job.input

    def create_ledger(self, topic: str) -> int:
        return self.job.ledger_id

    def append(self, ledger_id: int, entries: Sequence[NewEntry]) -> None:
        if ledger_id != self.job.ledger_id or not entries or entries[0][0] != self.entries:
            raise StorageError(f"ledger {ledger_id}: appends must continue at {self.entries}")
        messages = [d for _pos, d, _key, _flags in entries]
        data = compacted_batch(ledger_id, messages, live_only(entries))
        self._put(data, len(entries), packed_digests(data, self._where()))

    def append_records(
        self,
        ledger_id: int,
        position: int,
        records: bytes,
        count: int,
        first_id: MessageId,
        last_id: MessageId,
        live_only: bool,
    ) -> None:
        if ledger_id != self.job.ledger_id or count < 1 or position != self.entries:
            raise StorageError(f"ledger {ledger_id}: appends must continue at {self.entries}")
        data = compacted_records_batch(records, count, first_id, last_id, live_only)
        self._put(data, count, key_digests(records, self._where()))

    def _where(self) -> str:
        return f"ledger {self.job.ledger_id} entry {self.entries}"

    def _put(self, data: bytes, count: int, digests: bytes) -> None:
        if self.sst is None or self.digests is None:
            sst = Path(self.job.sst_path)
            self.sst = SstWriter(sst, SST_BYTES_PER_SYNC)
            self.digests = SstWriter(digests_sst(sst), SST_BYTES_PER_SYNC)
        self.sst.put(keys.entry_key(self.job.ledger_id, self.entries), data)
        record = digest_record(data, count, digests)
        self.digests.put(keys.digest_key(self.job.ledger_id, self.entries), record)
        self.entries += count
        self.bytes += len(data)
        self.meter.wrote(count, len(data) + len(record))

    def seal(self, ledger_id: int) -> None:
        if self.sst is not None and self.digests is not None:
            self.sst.finish()
            self.digests.finish()

    def commit(
        self,
        topic: str,
        ledger_id: int,
        horizon: MessageId,
        expected_previous: int | None,
        incarnation: int = 0,
    ) -> None:
        sst = self.job.sst_path if self.entries else None
        digests = str(digests_sst(Path(self.job.sst_path))) if self.entries else None
        self.link.request(CommitLedger(ledger_id, sst, self.entries, self.bytes, horizon, digests))

    def delete_ledger(self, ledger_id: int) -> None:
        if ledger_id == self.job.ledger_id:  # a failed run's: the server drops the ledger
            Path(self.job.sst_path).unlink(missing_ok=True)
            digests_sst(Path(self.job.sst_path)).unlink(missing_ok=True)
        else:
            self.link.request(DeleteLedger(ledger_id))


@dataclass(frozen=True)
class LedgerCompactionJob:
    """One LEDGER topic's run, shipped to a worker (``WorkerPool.run``)."""

    input: CompactionInput
    ledger_id: int  # allocated by the server before the run
    store_path: str  # the server's RocksDB, opened here as a secondary instance
    sst_path: str
    work_dir: str
    phase_one_memory_bytes: int
    io_max_bytes_per_second: float
    threads: int = 1  # phase one digests on this many (compaction.worker.threads)

    def run(self, link: WorkerLink) -> CompactionResult:
        assert self.input.horizon is not None
        where = (self.store_path, self.work_dir, self.io_max_bytes_per_second)
        with metered_secondary(*where, [self.input.horizon], link) as (scans, limited):
            storage = WorkerCompactionStorage(scans, self, link)
            threads = 1 if limited else self.threads  # reading ahead would not
            compactor = TwoPhaseCompactor(
                storage,
                self.phase_one_memory_bytes,
                fault_from_env(crash=kill_self),
                partial(find_winners, threads=threads),
            )
            return compactor.compact(self.input.topic, link)


SECONDARY = "secondary"  # ``link.cache`` key: the secondary kept open between jobs


@contextmanager
def metered_secondary(
    store_path: str,
    work_dir: str,
    io_max_bytes_per_second: float,
    visible: Sequence[MessageId],
    link: WorkerLink,
) -> Iterator[tuple[MeteredScans, bool]]:
    """The server's store opened in this worker as a secondary instance (its own directory
    in ``work_dir``), caught up until every id of ``visible`` is, each batch read passing
    the job's ``log.cleaner.io.max.bytes.per.second`` throttle (whose sleeps a cancel cuts
    short); with it, whether that throttle limits at all.

    The instance stays open in ``link.cache`` for the worker's next job on the same store
    (opening one replays the primary's WAL: about 80 ms, a third of a 200k-record run);
    a catch-up applies only what the primary wrote since. A job that fails closes it, and
    a kept one that cannot catch up is replaced by a fresh one."""
    throttler = Throttler(io_max_bytes_per_second, sleep=sleep_checking(link.check))
    scans, kept = _secondary(store_path, work_dir, link.cache)
    scans.meter = RunMeter(throttler)
    done = False
    try:
        try:
            _catch_up(scans, visible)
        except CompactlogError:  # StorageError, DataLoss: a kept one gets a second chance
            if not kept:
                raise
            drop_secondary(link.cache)
            scans, _kept = _secondary(store_path, work_dir, link.cache)
            scans.meter = RunMeter(throttler)
            _catch_up(scans, visible)
        yield scans, throttler.limited
        done = True
    finally:
        if not done:
            drop_secondary(link.cache)


def _secondary(store_path: str, work_dir: str, cache: dict[Any, Any]) -> tuple[MeteredScans, bool]:
    """The kept secondary of ``store_path`` (True), else a new one, kept from now on."""
    held = cache.get(SECONDARY)
    # the IDENTITY file names the database: a store made anew at the path is another one
    try:
        identity = (Path(store_path) / "IDENTITY").read_bytes()
    except OSError:  # no such file: the open below says what is wrong
        identity = b""
    if held is not None and held[0] == (store_path, work_dir, identity):
        return held[1], True
    drop_secondary(cache)  # one store's at a time: a slot's store may go with its slot
    scans = MeteredScans(Path(store_path), Path(work_dir) / f"secondary-{os.getpid()}")
    cache[SECONDARY] = ((store_path, work_dir, identity), scans)
    return scans, False


def _catch_up(scans: MeteredScans, visible: Sequence[MessageId]) -> None:
    for at in visible:
        scans.catch_up_to(at)


def drop_secondary(cache: dict[Any, Any]) -> None:
    """Close the secondary ``cache`` keeps, if it keeps one."""
    held = cache.pop(SECONDARY, None)
    if held is not None:
        held[1].close()
