"""DeleteRecords (key 21): a partition's log start offset raised through the call behind
gRPC DeleteRecords (``Broker.delete_records``: the offset recorded, then the segments
wholly below it dropped, as retention does), answered with the new low watermark (the log
start offset). Offset -1 means the high watermark (the log end offset: every record);
an offset at or below the log start changes nothing; one past the log end offset, or
below -1, is OFFSET_OUT_OF_RANGE, as Kafka's. Partition ``i`` of a partitioned topic is
its topic ``NAME-partition-i``.
"""

from __future__ import annotations

from typing import Any

from compactlog.server.kafka.errors import ErrorCode, KafkaError, code_of
from compactlog.server.kafka.protocol import NO_THROTTLE, make, response_module
from compactlog.server.kafka.topics import KafkaContext

DELETE_RECORDS = 21
HIGH_WATERMARK = -1


def delete_before(ctx: KafkaContext, topic: str, partition: int, offset: int) -> int:
    """Delete the records below ``offset``; the low watermark after it."""
    log = ctx.log(topic, partition)
    if offset == HIGH_WATERMARK:
        offset = log.latest().entry_id
    elif offset < 0:
        raise KafkaError(ErrorCode.offset_out_of_range, f"offset {offset}")
    return ctx.broker_of(log.name).delete_records(log.name, offset).log_start_offset


async def delete_partition(ctx: KafkaContext, module: Any, topic: str, part: Any) -> Any:
    try:
        low = await ctx.run(delete_before, ctx, topic, part.partition_index, part.offset)
        code = ErrorCode.none
    except Exception as exc:
        low, code = -1, code_of(exc)
    return make(
        module.DeleteRecordsPartitionResult,
        partition_index=part.partition_index,
        low_watermark=low,
        error_code=code,
    )


async def handle(ctx: KafkaContext, request: Any, version: int) -> Any:
    module = response_module(DELETE_RECORDS, version)
    topics = []
    for topic in request.topics:
        parts = [await delete_partition(ctx, module, topic.name, p) for p in topic.partitions]
        topics.append(
            make(module.DeleteRecordsTopicResult, name=topic.name, partitions=tuple(parts))
        )
    return make(module.DeleteRecordsResponse, throttle_time=NO_THROTTLE, topics=tuple(topics))
