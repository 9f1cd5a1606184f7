"""A Fetch's reads: each partition's stored batches from its fetch offset, converted.

The fetch worker's side of a Fetch (``fetch.py`` answers it): whole stored batches from
``TopicLog.batches`` (CRC-checked like every read), a partition's worth converted to
RecordBatch v2 in one compiled call (``records``), within ``max_bytes`` and
``partition_max_bytes`` as Kafka does (KIP-74): whole batches, and only the first batch of
the response may pass them.

The stored batches a read took from the log but could not give (the one that did not
fit) are its ``spare``: a read-ahead (``fetch_ahead``) starts the next read of that
partition from them instead of reading and checking them from the log again, when the
log's ``generation`` shows nothing but appends since they were read.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from compactlog.server.kafka.errors import ErrorCode, code_of
from compactlog.server.kafka.records import fetched_records
from compactlog.storage.read_range import ViewBatch
from compactlog.storage.segmented.topic_log import SegmentedTopicLog
from compactlog.storage.topic_log import TopicLog
from compactlog.storage.types import MessageId

# Stored bytes converted a call at most: a Fetch of a client's usual 1 MiB partition limit
# is one call, and a huge limit does not hold the whole log in memory twice.
CHUNK_BYTES = 4 << 20


@dataclass
class Wanted:
    topic: str
    partition: int
    offset: int
    max_bytes: int
    log: TopicLog | None = None
    error: ErrorCode = ErrorCode.none


@dataclass(frozen=True)
class Spare:
    """Stored batches read and checked but not given, and the log's generation noted
    before they were read."""

    generation: int
    batches: Sequence[ViewBatch]


@dataclass
class Read:
    error: ErrorCode = ErrorCode.none
    records: bytes | memoryview = b""  # RecordBatch v2: the conversion's view, not copied
    high_watermark: int = -1
    log_start: int = -1
    next_offset: int = -1  # after the last record given: the client's next fetch offset
    spare: Spare | None = field(default=None, repr=False)


def generation(log: TopicLog | None) -> int | None:
    """``log``'s generation (None: no log, or a kind without one: nothing is reused)."""
    return log.generation() if isinstance(log, SegmentedTopicLog) else None


def read_partition(want: Wanted, limit: int, first: bool, spare: Spare | None = None) -> Read:
    """Whole batches from ``want.offset`` up to ``limit`` bytes (one batch past it when
    ``first``: the response's first data must come whatever its size), starting from
    ``spare`` when it still holds the log's bytes at ``want.offset``."""
    log = want.log
    assert log is not None
    noted = generation(log)
    end, start = log.latest().entry_id, log.earliest().entry_id
    if not start <= want.offset <= end:
        return Read(ErrorCode.offset_out_of_range, b"", end, start)
    where = f"topic {log.name!r}"
    batches = _batches(log, want.offset, end, spare, noted)
    out: list[memoryview] = []
    size, last, left = 0, want.offset - 1, None
    while want.offset < end:
        chunk = _stored_chunk(batches, min(limit - size, CHUNK_BYTES))
        if not chunk:
            break
        data, used, given = fetched_records(
            chunk, want.offset, limit - size, first and not size, where
        )
        if data:  # a chunk whose first batch did not fit gives none: nothing to join
            out.append(data)
        size += len(data)
        last = max(last, given)
        if used < len(chunk):
            left = None if noted is None else Spare(noted, chunk[used:])
            break
    records = out[0] if len(out) == 1 else b"".join(out)  # one chunk (the usual): no copy
    return Read(ErrorCode.none, records, end, start, last + 1, left)


def _batches(
    log: TopicLog, offset: int, end: int, spare: Spare | None, noted: int | None
) -> Iterator[ViewBatch]:
    """The stored batches from ``offset`` to ``end``: the spare ones first when they
    hold ``offset`` and nothing but appends happened since they were read (the same
    generation, noted before either read), then the log's from after them."""
    if spare is not None and noted is not None and spare.generation == noted:
        held = spare.batches
        first, last = held[0][1].first_id.entry_id, held[-1][1].last_id.entry_id
        if first <= offset <= last:
            after = log.batches(MessageId(0, last + 1), MessageId(0, end - 1), False)
            return itertools.chain(held, after) if last + 1 < end else iter(held)
    return iter(log.batches(MessageId(0, offset), MessageId(0, end - 1), False))


def _stored_chunk(batches: Iterator[ViewBatch], room: int) -> list[ViewBatch]:
    """Stored batches until their stored size passes ``room``: what one conversion call
    likely needs (a Kafka record is about its stored size or less), read lazily so a
    Fetch reads little past its limit; empty when the log has no more."""
    chunk: list[ViewBatch] = []
    stored = 0
    for batch in batches:
        chunk.append(batch)
        stored += batch[1].size
        if stored > room:
            break
    return chunk


def read_all(
    wanted: list[Wanted], max_bytes: int, spares: Sequence[Spare | None] = ()
) -> list[Read]:
    """Each partition's read, within ``max_bytes`` in all; ``spares``: what the reads
    this one continues left over, a partition each (none: all read from the logs)."""
    reads: list[Read] = []
    total = 0
    for want, spare in itertools.zip_longest(wanted, spares[: len(wanted)]):
        if want.log is None:
            reads.append(Read(want.error))
            continue
        limit = min(want.max_bytes, max_bytes - total)
        try:
            read = read_partition(want, max(limit, 0), total == 0, spare)
        except Exception as exc:  # a corrupt batch fails its partition, not the request
            read = Read(code_of(exc))
        total += len(read.records)
        reads.append(read)
    return reads
