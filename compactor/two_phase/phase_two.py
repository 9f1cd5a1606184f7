"""Phase two's reading half: the winners' bytes, in id order, segment by segment.

For each segment phase one's result gives the winners as a bitmap (``selection``: the
local engine looks each key up in its offset map, the Spark engine hands over bitmaps),
and ``read_entries`` returns the selected entries' bytes — ``Message`` bytes with their
original ids, copied verbatim. The compactor appends them to the new ledger; a preview only
counts them. Progress is reported and the cancel flag checked once a segment and every
``CHECK_EVERY`` winners.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from compactlog.compactor.progress import PHASE_TWO, Progress, RunControl
from compactlog.compactor.two_phase.phase_one import PhaseOneResult
from compactlog.compactor.two_phase.storage import (
    CompactionInput,
    CompactionReads,
    TombstoneRetention,
)
from compactlog.storage.types import MessageId
from compactlog.v1 import compactlog_pb2 as pb

CHECK_EVERY = 4096  # winners between progress reports and cancel checks


@dataclass
class PhaseTwoMeter:
    """Phase two's figures so far, reported through the run's control."""

    control: RunControl
    total: int  # input entries of the run
    done: int = 0  # input entries passed
    bytes_read: int = 0
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


def kept_tombstone(data: bytes, retention: TombstoneRetention) -> bool | None:
    """None: ``data`` is no tombstone; else whether the run's retention keeps it."""
    msg = pb.Message.FromString(data)
    if not msg.HasField("key") or (msg.HasField("value") and msg.value):
        return None
    return retention.keeps(MessageId(msg.id.ledger_id, msg.id.entry_id), msg.publish_time_ms)
