"""Fetch (key 1): the partitions' records from the fetch offsets, as RecordBatch v2.

A Fetch reads the topic's stored batches (``TopicLog.batches``, CRC-checked like every
read) and converts a partition's worth of them in one compiled call (``records``),
without the GIL. With nothing to give yet it long-polls as a follow Read does: it takes
each partition's change future from the topic signals *before* looking, then waits for
the first append or ``max_wait_ms``, so no wake-up is lost and nothing polls.
``max_bytes`` and ``partition_max_bytes`` are honoured as Kafka does (KIP-74): whole
batches, and only the first batch of the response may pass them. No fetch sessions
(KIP-227): every answer is a full one (session id 0).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from compactlog.server.kafka.errors import ErrorCode, KafkaError, code_of
from compactlog.server.kafka.protocol import NO_THROTTLE, make, response_module
from compactlog.server.kafka.records import fetched_records
from compactlog.server.kafka.topics import KafkaContext
from compactlog.storage.read_range import ViewBatch
from compactlog.storage.topic_log import TopicLog
from compactlog.storage.types import MessageId

FETCH = 1
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
    size = 0
    while want.offset < end:
        chunk = _stored_chunk(batches, min(limit - size, CHUNK_BYTES))
        if not chunk:
            break
        data, used = fetched_records(chunk, want.offset, limit - size, first and not size, where)
        out.append(data)
        size += len(data)
        if used < len(chunk):
            break
    return Read(ErrorCode.none, b"".join(out), end, start)


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


def _resolve(ctx: KafkaContext, request: Any) -> list[Wanted]:
    wanted = []
    for topic in request.topics:
        for part in topic.partitions:
            want = Wanted(topic.topic, part.partition, part.fetch_offset, part.partition_max_bytes)
            try:
                want.log = ctx.log(topic.topic, part.partition)
            except KafkaError as exc:
                want.error = exc.code
            wanted.append(want)
    return wanted


async def handle(ctx: KafkaContext, request: Any, version: int) -> Any:
    loop = asyncio.get_running_loop()
    wanted = _resolve(ctx, request)
    deadline = loop.time() + request.max_wait.total_seconds()
    max_bytes = getattr(request, "max_bytes", 2**31 - 1)
    while True:
        changes = [ctx.next_change(w.log.name) for w in wanted if w.log is not None]
        reads = await ctx.run(read_all, wanted, max_bytes)
        got = sum(len(r.records) for r in reads)
        failed = any(r.error != ErrorCode.none for r in reads)
        remaining = deadline - loop.time()
        if got >= request.min_bytes or failed or remaining <= 0 or not changes:
            break
        if ctx.stopping:
            break
        await asyncio.wait(changes, timeout=remaining)  # shared futures: never cancelled
    return _response(version, wanted, reads)


def _response(version: int, wanted: list[Wanted], reads: list[Read]) -> Any:
    module = response_module(FETCH, version)
    by_topic: dict[str, list[Any]] = {}
    for want, read in zip(wanted, reads, strict=True):
        by_topic.setdefault(want.topic, []).append(
            make(
                module.PartitionData,
                partition_index=want.partition,
                error_code=read.error,
                high_watermark=read.high_watermark,
                last_stable_offset=read.high_watermark,
                log_start_offset=read.log_start,
                aborted_transactions=None,
                preferred_read_replica=-1,
                records=read.records,
            )
        )
    topics = tuple(
        make(module.FetchableTopicResponse, topic=name, partitions=tuple(parts))
        for name, parts in by_topic.items()
    )
    return make(
        module.FetchResponse,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        session_id=0,
        responses=topics,
    )
