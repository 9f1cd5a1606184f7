"""Phase two's reading half: the winners' bytes, in id order, segment by segment.

For each segment phase one's result gives the winners as a bitmap (``selection``: the
local engine looks each key up in its offset map, the Spark engine hands over bitmaps),
and ``read_entries`` returns the selected entries' bytes — ``Message`` bytes with their
original ids, copied verbatim. The compactor appends them to the new ledger; a preview only
counts them. Storages of stored batches (``BatchStorage``) are copied one call per batch
instead (``WinnerCopier``: ``batch_scan.select_batch`` picks a batch's winners, already
framed, and ``append_records`` writes them), in the same output batches of
``APPEND_BATCH``. Progress is reported and the cancel flag checked once a segment and
every ``CHECK_EVERY`` winners (with batches: at the first batch boundary after them).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from compactlog.compactor.log_cleaner.batch_scan import select_batch
from compactlog.compactor.progress import PHASE_TWO, Progress, RunControl
from compactlog.compactor.two_phase.phase_one import PhaseOneResult
from compactlog.compactor.two_phase.storage import (
    BatchStorage,
    CompactionInput,
    CompactionReads,
    Segment,
    TombstoneRetention,
)
from compactlog.errors import DataLoss
from compactlog.storage.types import MessageId
from compactlog.v1 import compactlog_pb2 as pb

CHECK_EVERY = 4096  # winners between progress reports and cancel checks


@dataclass
class PhaseTwoMeter:
    """Phase two's figures so far, reported through the run's control."""

    control: RunControl
    total: int  # input entries of the run
    done: int = 0  # input entries passed
    bytes_read: int = 0  # the run's: phase one's bytes, then phase two's reads added
    bytes_written: int = 0
    tombstones_kept: int = 0  # winners that are tombstones the run's retention keeps

    def report(self) -> None:
        self.control.report(
            Progress(PHASE_TWO, self.done, self.total, self.bytes_read, self.bytes_written)
        )
        self.control.check()


def winners_in_order(
    storage: CompactionReads,
    inp: CompactionInput,
    winners: PhaseOneResult,
    meter: PhaseTwoMeter,
) -> Iterator[bytes]:
    """The winners' entry bytes in id order (input order). When the run keeps tombstones,
    each winning tombstone is asked ``TombstoneRetention.keeps`` (by its id and publish
    time, read from its bytes); the others are left out here."""
    retention = inp.tombstones
    position = 0
    for index, seg in enumerate(inp.segments):
        meter.report()
        bits = winners.selection(storage, index, seg)
        if any(bits):
            since = 0
            for eid, data in storage.read_entries(seg, bits):
                meter.bytes_read += len(data)
                since += 1
                if since >= CHECK_EVERY:
                    since = 0
                    meter.done = position + eid - seg.first_entry
                    meter.report()
                if retention is not None:
                    kept = kept_tombstone(data, retention)
                    if kept is False:
                        continue
                    meter.tombstones_kept += kept is True
                yield data
        position += seg.length
        meter.done = position
    meter.report()


class WinnerCopier:
    """Phase two over a ``BatchStorage``: each stored batch's winners in one call, packed
    into output batches of exactly ``batch_size`` entries (the last one fewer), the same
    bytes as appending the winners one by one. ``first_append`` runs after the first.
    An output batch whose records are all keyed and live carries ``LIVE_ONLY``."""

    def __init__(self, storage: BatchStorage, ledger_id: int, batch_size: int) -> None:
        self.storage, self.ledger_id, self.batch_size = storage, ledger_id, batch_size
        self.not_live = 0  # keyless records (or tombstones) in the batch being packed
        self.records = bytearray()
        self.count = self.appended = 0
        self.first_id = self.last_id = MessageId(0, 0)
        self.on_first_append: Callable[[], None] | None = None

    def copy(self, inp: CompactionInput, winners: PhaseOneResult, meter: PhaseTwoMeter) -> int:
        """Copy every segment's winners; the entries appended."""
        position = 0
        for index, seg in enumerate(inp.segments):
            meter.report()
            bits = winners.selection(self.storage, index, seg)  # type: ignore[arg-type]
            wanted = int.from_bytes(bits, "little").bit_count()
            if wanted:
                hits = self._segment(seg, bits, position, meter)
                if hits != wanted:
                    raise DataLoss(
                        f"ledger {seg.ledger_id} lacks {wanted - hits} selected entries",
                        ledger=seg.ledger_id,
                    )
            position += seg.length
            meter.done = position
        self.flush()
        meter.report()
        return self.appended

    def _segment(self, seg: Segment, bits: bytearray, position: int, meter: PhaseTwoMeter) -> int:
        hits = since = 0
        for at, payload, where in self.storage.stored_batches(seg):
            pos = max(at, seg.first_entry)
            while True:
                room = self.batch_size - self.count
                records, n, nbytes, fl, fe, ll, le, pos, dead = select_batch(
                    payload, at, pos, seg.last_entry, bits, seg.first_entry, room, where
                )
                if n:
                    if not self.count:
                        self.first_id = MessageId(fl, fe)
                    self.records += records
                    self.count += n
                    self.not_live += dead
                    self.last_id = MessageId(ll, le)
                    hits += n
                    since += n
                    meter.bytes_read += nbytes
                    meter.bytes_written += nbytes
                if self.count >= self.batch_size:
                    self.flush()
                if n < room:
                    break
            if since >= CHECK_EVERY:
                since = 0
                meter.done = position + min(pos, seg.last_entry + 1) - seg.first_entry
                meter.report()
        return hits

    def flush(self) -> None:
        if not self.count:
            return
        self.storage.append_records(
            self.ledger_id,
            self.appended,
            bytes(self.records),
            self.count,
            self.first_id,
            self.last_id,
            self.not_live == 0,
        )
        self.appended += self.count
        self.records, self.count, self.not_live = bytearray(), 0, 0
        hook, self.on_first_append = self.on_first_append, None
        if hook is not None:
            hook()


def kept_tombstone(data: bytes, retention: TombstoneRetention) -> bool | None:
    """None: ``data`` is no tombstone; else whether the run's retention keeps it."""
    msg = pb.Message.FromString(data)
    if not msg.HasField("key") or (msg.HasField("value") and msg.value):
        return None
    return retention.keeps(MessageId(msg.id.ledger_id, msg.id.entry_id), msg.publish_time_ms)
