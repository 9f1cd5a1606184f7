"""Fetch (key 1): the partitions' records from the fetch offsets, as RecordBatch v2.

A Fetch reads the topic's stored batches (``TopicLog.batches``, CRC-checked like every
read) and converts a partition's worth of them in one compiled call (``records``),
without the GIL. With nothing to give yet it long-polls as a follow Read does: it takes
each partition's change future from the topic signals *before* looking, then waits for
the first append or ``max_wait_ms``, so no wake-up is lost and nothing polls.
``max_bytes`` and ``partition_max_bytes`` are honoured as Kafka does (KIP-74): whole
batches, and only the first batch of the response may pass them (``fetch_read``). A
connection that fetches sequentially finds its next answer read ahead while it handles
this one (``fetch_ahead``). No fetch sessions (KIP-227): every answer is a full one
(session id 0).
"""

from __future__ import annotations

import asyncio
from typing import Any

from compactlog.server.kafka.errors import ErrorCode, KafkaError
from compactlog.server.kafka.fetch_ahead import (
    READ_AHEAD,
    Prepared,
    ReadAhead,
    prepared_reads,
    shape_of,
)
from compactlog.server.kafka.fetch_read import Read, Wanted, read_all
from compactlog.server.kafka.protocol import NO_THROTTLE, make, response_module
from compactlog.server.kafka.topics import KafkaContext

FETCH = 1


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
    ahead = READ_AHEAD.get() or ReadAhead()  # no connection: never sequential
    sequential, prepared = ahead.take(shape_of(wanted, max_bytes))
    while True:
        changes = [ctx.next_change(w.log.name) for w in wanted if w.log is not None]
        reads = await _look(ctx, wanted, max_bytes, prepared, request.min_bytes)
        prepared = None  # the first look only: a long poll's later looks read afresh
        got = sum(len(r.records) for r in reads)
        failed = any(r.error != ErrorCode.none for r in reads)
        remaining = deadline - loop.time()
        if got >= request.min_bytes or failed or remaining <= 0 or not changes:
            break
        if ctx.stopping:
            break
        await asyncio.wait(changes, timeout=remaining)  # shared futures: never cancelled
    ahead.follow(ctx, wanted, reads, max_bytes, sequential)
    return _response(version, wanted, reads)


async def _look(
    ctx: KafkaContext,
    wanted: list[Wanted],
    max_bytes: int,
    prepared: asyncio.Future[Prepared] | None,
    min_bytes: int,
) -> list[Read]:
    """The partitions' reads: the answer read ahead when it can stand for a fresh read
    (``fetch_ahead.prepared_reads``), else read now."""
    if prepared is not None:
        reads = await prepared_reads(prepared, wanted, min_bytes)
        if reads is not None:
            return reads
    return await ctx.run(read_all, wanted, max_bytes)


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
