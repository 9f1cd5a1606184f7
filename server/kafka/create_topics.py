"""CreateTopics (key 19): SEGMENTED topics, with Kafka's topic config names (the same
keys as CONTRACT section 3: ``cleanup.policy``, ``retention.ms``, ``segment.bytes`` ...).
``num_partitions`` > 1 makes a partitioned topic (``server.admin.partitioned_topics``);
-1 or 1 a plain one. One broker: a replication factor other than 1 (or -1, the default)
is INVALID_REPLICATION_FACTOR; manual replica assignments are INVALID_REQUEST.

Under partition placement (``KafkaContext.front``) a create is the front's CreateTopic,
the call gRPC takes, so a partitioned topic's partitions are placed over the slots as
gRPC places them; ``validate_only`` is that call marked validate-only, checked on every
slot the create touches and by the front, made nowhere (``server.admin.validation``), so
it answers what the create would.
"""

from __future__ import annotations

from typing import Any

from compactlog.server.admin.partitioned_topics import PartitionedNamespace
from compactlog.server.kafka.errors import ErrorCode, KafkaError, code_of
from compactlog.server.kafka.part_errors import topic_result
from compactlog.server.kafka.protocol import NO_THROTTLE, make, response_module
from compactlog.server.kafka.topics import KafkaContext
from compactlog.storage.types import TopicKind

CREATE_TOPICS = 19


def wanted(topic: Any) -> tuple[int, dict[str, str]]:
    """The partition count and config a CreateTopics topic asks for, checked."""
    partitions = 1 if topic.num_partitions == -1 else topic.num_partitions
    if partitions < 1:
        raise KafkaError(ErrorCode.invalid_partitions, f"num_partitions {partitions}")
    if topic.replication_factor not in (-1, 1):
        raise KafkaError(
            ErrorCode.invalid_replication_factor,
            f"replication factor {topic.replication_factor}: this broker is the only one",
        )
    if topic.assignments:
        raise KafkaError(ErrorCode.invalid_request, "replica assignments are not supported")
    return partitions, {c.name: c.value for c in topic.configs if c.value is not None}


def create(ctx: KafkaContext, topic: Any, validate_only: bool) -> int:
    """Create (or, ``validate_only``, check) one topic here; its partition count."""
    partitions, config = wanted(topic)
    namespace = PartitionedNamespace(ctx.broker_of(topic.name))
    if validate_only and partitions > 1:  # every check of the create, nothing made
        namespace.check(topic.name, TopicKind.SEGMENTED, config, partitions)
    elif validate_only:
        namespace.check_plain(topic.name, TopicKind.SEGMENTED, config)
    elif partitions > 1:
        namespace.create(topic.name, TopicKind.SEGMENTED, config, partitions)
    else:
        namespace.create_plain(topic.name, TopicKind.SEGMENTED, config)
    return partitions


async def create_one(ctx: KafkaContext, module: Any, topic: Any, validate_only: bool) -> Any:
    try:
        if ctx.front is None:
            partitions = await ctx.run(create, ctx, topic, validate_only)
        else:
            count, config = wanted(topic)
            partitions = await ctx.front.create(topic.name, config, count, validate_only)
        code, message = ErrorCode.none, None
    except Exception as exc:
        partitions, code, message = -1, code_of(exc), str(exc)
    return topic_result(module, topic.name, code, message, partitions)


async def handle(ctx: KafkaContext, request: Any, version: int) -> Any:
    module = response_module(CREATE_TOPICS, version)
    validate_only = getattr(request, "validate_only", False)
    topics = [await create_one(ctx, module, t, validate_only) for t in request.topics]
    return make(module.CreateTopicsResponse, throttle_time=NO_THROTTLE, topics=tuple(topics))
