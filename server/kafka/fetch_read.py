"""A Fetch's reads: each partition's stored batches from its fetch offset, converted.

The fetch worker's side of a Fetch (``fetch.py`` answers it): whole stored batches from
``TopicLog.batches`` (CRC-checked like every read), a partition's worth converted to
RecordBatch v2 in one compiled call (``records``), within ``max_bytes`` and
``partition_max_bytes`` as Kafka does (KIP-74): whole batches, and only the first batch of
the response may pass them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from compactlog.server.kafka.errors import ErrorCode, code_of
from compactlog.server.kafka.records import fetched_records
from compactlog.storage.read_range import ViewBatch
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


@dataclass
class Read:
    error: ErrorCode = ErrorCode.none
    records: bytes = b""
    high_watermark: int = -1
    log_start: int = -1
    next_offset: int = -1  # after the last record given: the client's next fetch offset


def read_partition(want: Wanted, limit: int, first: bool) -> Read:
    """Whole batches from ``want.offset`` up to ``limit`` bytes (one batch past it when
    ``first``: the response's first data must come whatever its size)."""
    log = want.log
    assert log is not None
    end, start = log.latest().entry_id, log.earliest().entry_id
    if not start <= want.offset <= end:
        return Read(ErrorCode.offset_out_of_range, b"", end, start)
    where = f"topic {log.name!r}"
    batches = iter(log.batches(MessageId(0, want.offset), MessageId(0, end - 1), False))
    out: list[bytes] = []
    size, last = 0, want.offset - 1
    while want.offset < end:
        chunk = _stored_chunk(batches, min(limit - size, CHUNK_BYTES))
        if not chunk:
            break
        data, used, given = fetched_records(
            chunk, want.offset, limit - size, first and not size, where
        )
        out.append(data)
        size += len(data)
        last = max(last, given)
        if used < len(chunk):
            break
    return Read(ErrorCode.none, b"".join(out), end, start, last + 1)


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


def read_all(wanted: list[Wanted], max_bytes: int) -> list[Read]:
    reads: list[Read] = []
    total = 0
    for want in wanted:
        if want.log is None:
            reads.append(Read(want.error))
            continue
        limit = min(want.max_bytes, max_bytes - total)
        try:
            read = read_partition(want, max(limit, 0), total == 0)
        except Exception as exc:  # a corrupt batch fails its partition, not the request
            read = Read(code_of(exc))
        total += len(read.records)
        reads.append(read)
    return reads
