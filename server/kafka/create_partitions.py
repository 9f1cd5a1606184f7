"""CreatePartitions (key 37): a partitioned topic grown to ``count`` partitions through
gRPC AddPartitions' call (``PartitionedNamespace.add_partitions``, under the namespace
lock, the count recorded after the partitions exist: a crash in between is rolled forward
at start), so its all-or-nothing holds. ``validate_only`` runs every check of that call
(the new partitions' names free too) and creates nothing.

Kafka's answers: a count that does not grow the topic is INVALID_PARTITIONS (Kafka
refuses the same count too); a topic created without partitions (one Kafka partition,
stored as the topic itself) cannot grow, as over gRPC: INVALID_PARTITIONS saying so; an
unknown or LEDGER topic UNKNOWN_TOPIC_OR_PARTITION; a topic named twice INVALID_REQUEST.
Manual assignments may name only this broker (node 0), one list per new partition, else
INVALID_REPLICA_ASSIGNMENT.
"""

from __future__ import annotations

from typing import Any

from compactlog.errors import InvalidArgument
from compactlog.server.admin.partitioned_topics import PartitionedNamespace
from compactlog.server.kafka.errors import ErrorCode, KafkaError, code_of
from compactlog.server.kafka.protocol import NO_THROTTLE, make, response_module
from compactlog.server.kafka.topics import KafkaContext

CREATE_PARTITIONS = 37


def grow(ctx: KafkaContext, topic: Any, validate_only: bool) -> None:
    """Grow (or, ``validate_only``, check growing) one topic to ``topic.count``."""
    current = ctx.partitions(topic.name)
    if topic.count <= current:
        raise KafkaError(
            ErrorCode.invalid_partitions,
            f"topic {topic.name!r} has {current} partition(s): a count of {topic.count} "
            "does not grow it",
        )
    _check_assignments(topic, topic.count - current, ctx.cluster.leader_of(topic.name))
    try:
        PartitionedNamespace(ctx.broker_of(topic.name)).add_partitions(
            topic.name, topic.count, validate_only
        )
    except InvalidArgument as exc:  # not partitioned, shrinking (a race), over the bound
        if exc.metadata.get("field") != "partitions":
            raise
        raise KafkaError(ErrorCode.invalid_partitions, str(exc)) from None


def _check_assignments(topic: Any, new: int, leader: int) -> None:
    """Assignments, when given, name the one broker that stores the topic."""
    assignments = topic.assignments
    if assignments is None:
        return
    if len(assignments) != new:
        raise KafkaError(
            ErrorCode.invalid_replica_assignment,
            f"{new} new partition(s) but {len(assignments)} assignment(s)",
        )
    for assignment in assignments:
        if tuple(assignment.broker_ids) != (leader,):
            raise KafkaError(
                ErrorCode.invalid_replica_assignment,
                f"brokers {list(assignment.broker_ids)}: the topic's one broker is {leader}",
            )


async def grow_one(
    ctx: KafkaContext, module: Any, topic: Any, validate_only: bool, twice: set[str]
) -> Any:
    try:
        if topic.name in twice:
            raise KafkaError(ErrorCode.invalid_request, f"topic {topic.name!r} named twice")
        await ctx.run(grow, ctx, topic, validate_only)
        code, message = ErrorCode.none, None
    except Exception as exc:
        code, message = code_of(exc), str(exc)
    return make(
        module.CreatePartitionsTopicResult, name=topic.name, error_code=code, error_message=message
    )


async def handle(ctx: KafkaContext, request: Any, version: int) -> Any:
    module = response_module(CREATE_PARTITIONS, version)
    names = [t.name for t in request.topics]
    twice = {n for n in names if names.count(n) > 1}
    results = [await grow_one(ctx, module, t, request.validate_only, twice) for t in request.topics]
    return make(module.CreatePartitionsResponse, throttle_time=NO_THROTTLE, results=tuple(results))
