"""BatchWriter: packs the surviving message records of a cleaning pass into new batches.

Records are copied byte for byte (their offsets are inside them and never change); only
batch headers are new. Survivors of consecutive source batches share one output batch up
to ``MAX_BATCH_BYTES``, so a log of one-record publishes does not keep one 72-byte header
per survivor. An output batch gets:

* ``first_id``/``last_id``/``count`` of the records it holds, and the COMPACTED attribute
  unless its records are a gapless run of one plain source batch (ids with gaps, or
  publish times of several publishes: readers then look at each record instead of
  deriving ids and times from the header);
* the publish time of its first source batch and, as max event time, the largest of its
  source batches' (an upper bound: a removed record may have held it, which only makes
  retention and timestamp lookups look a little further);
* the delete horizon of the tombstones it holds (Kafka 2.8+ keeps it per batch): the
  source batch's when it had one, else ``now + delete.retention.ms``. Survivors whose
  tombstones carry another horizon start a new output batch, so no tombstone ever gets a
  later or earlier horizon than its own.
"""

from __future__ import annotations

from typing import Protocol

from compactlog.storage.batch import COMPACTED, NO_HORIZON, BatchHeader, pack
from compactlog.storage.types import MessageId

MAX_BATCH_BYTES = 1024 * 1024
_MIN_TS = -(2**63)


class BatchSink(Protocol):
    """Where packed batches go: a ``.cleaned`` ``LogSegment``, or a dry run's count."""

    size: int  # bytes appended so far

    def append_batch(
        self, data: bytes, first: int, last: int, count: int, max_ts: int
    ) -> object: ...  # what it returns (a segment's mark) is not the sink's business


class CountedBatches:
    """A dry run's sink (PreviewCompaction): the bytes the ``.cleaned`` segment would hold,
    counted batch by batch as ``LogSegment.append_batch`` would write them; no file."""

    def __init__(self) -> None:
        self.size = 0
        self.batches = 0

    def append_batch(self, data: bytes, first: int, last: int, count: int, max_ts: int) -> None:
        self.size += len(data)
        self.batches += 1


class BatchWriter:
    """Buffers survivors and appends packed batches to a ``.cleaned`` segment."""

    def __init__(self, segment: BatchSink, max_bytes: int = MAX_BATCH_BYTES) -> None:
        self.segment = segment
        self.max_bytes = max_bytes
        self.records = 0
        self._reset()

    def _reset(self) -> None:
        self.parts: list[bytes] = []
        self.size = self.count = self.sources = 0
        self.first = self.last = -1
        self.publish = 0
        self.max_ts = _MIN_TS
        self.horizon = NO_HORIZON
        self.plain = True  # no source batch so far was COMPACTED

    def add(
        self,
        parts: list[bytes],
        count: int,
        first: int,
        last: int,
        source: BatchHeader,
        tomb_horizon: int,
    ) -> None:
        """Survivors of one source batch: ``parts`` (record bytes in order), ``count`` of
        them from offset ``first`` to ``last``; ``tomb_horizon`` is the delete horizon of
        the tombstones among them, or ``NO_HORIZON`` if there are none."""
        size = sum(len(p) for p in parts)
        if self.count and (
            self.size + size > self.max_bytes
            or (tomb_horizon != NO_HORIZON and self.horizon not in (NO_HORIZON, tomb_horizon))
        ):
            self.flush()
        if not self.count:
            self.first, self.publish = first, source.publish_time_ms
        self.parts += parts
        self.size += size
        self.count += count
        self.last = last
        self.sources += 1
        self.max_ts = max(self.max_ts, source.max_event_time_ms)
        if tomb_horizon != NO_HORIZON:
            self.horizon = tomb_horizon
        self.plain = self.plain and not source.compacted

    def flush(self) -> None:
        if not self.count:
            return
        plain = self.plain and self.sources == 1 and self.last - self.first + 1 == self.count
        data = pack(
            b"".join(self.parts),
            self.count,
            MessageId(0, self.first),
            MessageId(0, self.last),
            self.publish,
            self.max_ts,
            0 if plain else COMPACTED,
            self.horizon,
        )
        self.segment.append_batch(data, self.first, self.last, self.count, self.max_ts)
        self.records += self.count
        self._reset()
