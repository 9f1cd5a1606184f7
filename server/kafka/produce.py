"""Produce (key 0): each partition's record batches appended through the topic's
``TopicLog.append_request``, the very path of a gRPC Publish: one stored batch per
partition's records, in the Log service's append executor, answered once the append is
durable by the topic's own policy (``flush.messages`` / ``flush.ms`` for SEGMENTED
topics). ``acks`` 1 and -1 are the same on a single broker; ``acks=0`` gets no answer.
"""

from __future__ import annotations

import asyncio
from typing import Any

from compactlog.server.kafka.errors import ErrorCode, KafkaError, code_of
from compactlog.server.kafka.protocol import NO_THROTTLE, make, response_module
from compactlog.server.kafka.records import produced_request
from compactlog.server.kafka.topics import KafkaContext
from compactlog.server.log.thread_futures import future_of
from compactlog.storage.topic_log import Appended, TopicLog

PRODUCE = 0


def _append(log: TopicLog, data: bytes) -> tuple[Appended, int]:
    """Decode the Kafka batches (CRCs checked, decompressed) and append their records as
    one batch, all or none; with the log start offset after it."""
    appended = log.append_request(produced_request(data))
    return appended, log.earliest().entry_id


async def produce_partition(
    ctx: KafkaContext, module: Any, topic: str, index: int, records: bytes | None
) -> Any:
    try:
        log = ctx.log(topic, index)
        if not records:
            raise KafkaError(ErrorCode.invalid_record, "a produce with no records")
        loop = asyncio.get_running_loop()
        appended, log_start = await loop.run_in_executor(ctx.appends, _append, log, records)
        await future_of(appended.on_durable)
        base = appended.runs[0][1] if appended.runs else -1
        code, message = ErrorCode.none, None
    except Exception as exc:
        base, log_start, code, message = -1, -1, code_of(exc), str(exc)
    return make(
        module.PartitionProduceResponse,
        index=index,
        error_code=code,
        base_offset=base,
        log_append_time=None,
        log_start_offset=log_start,
        record_errors=(),
        error_message=message,
    )


async def handle(ctx: KafkaContext, request: Any, version: int) -> Any:
    module = response_module(PRODUCE, version)
    topics = []
    for topic in request.topic_data:
        parts = [
            await produce_partition(ctx, module, topic.name, part.index, part.records)
            for part in topic.partition_data
        ]
        topics.append(
            make(module.TopicProduceResponse, name=topic.name, partition_responses=tuple(parts))
        )
    if request.acks == 0:
        return None  # Kafka sends nothing back to an acks=0 producer
    return make(module.ProduceResponse, responses=tuple(topics), throttle_time=NO_THROTTLE)
