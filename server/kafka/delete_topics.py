"""DeleteTopics (key 20): SEGMENTED topics by name, through the broker calls of gRPC
DeleteTopic, so the same all-or-nothing behaviour: a partitioned topic's ``NAME``
deletes every partition; a LEDGER topic or an unknown name is
UNKNOWN_TOPIC_OR_PARTITION; a partition's own name (``NAME-partition-i``) is
INVALID_REQUEST, as gRPC refuses it. Topic ids (v6) are not kept: UNKNOWN_TOPIC_ID.
Under partition placement (``KafkaContext.front``) the delete is the front's DeleteTopic,
which deletes a partitioned topic's partitions in every slot holding some.
"""

from __future__ import annotations

from typing import Any

from compactlog.server.admin.partitioned_topics import PartitionedNamespace
from compactlog.server.kafka.errors import ErrorCode, KafkaError, code_of
from compactlog.server.kafka.protocol import NO_THROTTLE, make, response_module
from compactlog.server.kafka.topics import KafkaContext

DELETE_TOPICS = 20


def delete(ctx: KafkaContext, name: str) -> None:
    """Delete the Kafka topic ``name`` (every partition of a partitioned one)."""
    ctx.partitions(name)  # unknown and LEDGER topics: UNKNOWN_TOPIC_OR_PARTITION
    broker = ctx.broker_of(name)
    if broker.partitioned.get(name) is not None:
        PartitionedNamespace(broker).delete(name)
    else:
        broker.delete_topic(name)


async def delete_one(ctx: KafkaContext, module: Any, name: str | None) -> Any:
    try:
        if name is None:
            raise KafkaError(ErrorCode.unknown_topic_id, "topics are deleted by name here")
        if ctx.front is None:
            await ctx.run(delete, ctx, name)
        else:
            await ctx.run(ctx.partitions, name)  # unknown and LEDGER topics: as above
            await ctx.front.delete(name)
        code, message = ErrorCode.none, None
    except Exception as exc:
        code, message = code_of(exc), str(exc)
    return make(
        module.DeletableTopicResult,
        name=name,
        topic_id=None,
        error_code=code,
        error_message=message,
    )


def _names(request: Any) -> list[str | None]:
    if hasattr(request, "topic_names"):  # v1-v5
        return list(request.topic_names)
    return [t.name for t in request.topics]  # v6: name or topic id


async def handle(ctx: KafkaContext, request: Any, version: int) -> Any:
    module = response_module(DELETE_TOPICS, version)
    results = [await delete_one(ctx, module, name) for name in _names(request)]
    return make(module.DeleteTopicsResponse, throttle_time=NO_THROTTLE, responses=tuple(results))
