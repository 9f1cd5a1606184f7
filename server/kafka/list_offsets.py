"""ListOffsets (key 2): a partition's earliest offset (timestamp -2), its end offset
(-1, Kafka's "latest": the offset the next record gets) or the first offset whose record
was stored at or after a timestamp (``TopicLog.at_time``, the segments' time index; -1
when none is). Max-timestamp lookups (-3, KIP-734) answer UNSUPPORTED_VERSION for now.
"""

from __future__ import annotations

from typing import Any

from compactlog.server.kafka.errors import ErrorCode, KafkaError, code_of
from compactlog.server.kafka.protocol import NO_THROTTLE, make, response_module
from compactlog.server.kafka.topics import KafkaContext
from compactlog.storage.topic_log import TopicLog

LIST_OFFSETS = 2
LATEST = -1
EARLIEST = -2


def offset_for(log: TopicLog, timestamp: int) -> int:
    if timestamp == EARLIEST:
        return log.earliest().entry_id
    if timestamp == LATEST:
        return log.latest().entry_id
    if timestamp < 0:
        raise KafkaError(ErrorCode.unsupported_version, f"timestamp {timestamp}")
    found = log.at_time(timestamp).entry_id
    return -1 if found >= log.latest().entry_id else found


async def list_partition(ctx: KafkaContext, module: Any, topic: str, part: Any) -> Any:
    try:
        log = ctx.log(topic, part.partition_index)
        offset = await ctx.run(offset_for, log, part.timestamp)
        code = ErrorCode.none
    except Exception as exc:
        offset, code = -1, code_of(exc)
    return make(
        module.ListOffsetsPartitionResponse,
        partition_index=part.partition_index,
        error_code=code,
        timestamp=-1,
        offset=offset,
        leader_epoch=0,
    )


async def handle(ctx: KafkaContext, request: Any, version: int) -> Any:
    module = response_module(LIST_OFFSETS, version)
    topics = []
    for topic in request.topics:
        parts = [await list_partition(ctx, module, topic.name, p) for p in topic.partitions]
        topics.append(
            make(module.ListOffsetsTopicResponse, name=topic.name, partitions=tuple(parts))
        )
    return make(module.ListOffsetsResponse, throttle_time=NO_THROTTLE, topics=tuple(topics))
