"""CreatePartitions (key 37): a partitioned topic grown to ``count`` partitions through
gRPC AddPartitions' call (``PartitionedNamespace.add_partitions``, under the namespace
lock, the count recorded after the partitions exist: a crash in between is rolled forward
at start), so its all-or-nothing holds. ``validate_only`` runs every check of that call
(the new partitions' names free too) and creates nothing.

Kafka's answers: a count that does not grow the topic is INVALID_PARTITIONS (Kafka
refuses the same count too); a topic created without partitions (one Kafka partition,
stored as the topic itself) cannot grow, as over gRPC: INVALID_PARTITIONS saying so; an
unknown or LEDGER topic UNKNOWN_TOPIC_OR_PARTITION; a topic named twice INVALID_REQUEST.
Manual assignments may name only the broker that is to store each new partition (node 0
without shards), one list per new partition, else INVALID_REPLICA_ASSIGNMENT. Under
partition placement (``KafkaContext.front``) the grow is the front's AddPartitions, so
the new partitions go to the slots gRPC gives them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from compactlog.errors import InvalidArgument
from compactlog.server.admin.partitioned_topics import PartitionedNamespace
from compactlog.server.kafka.errors import ErrorCode, KafkaError, code_of
from compactlog.server.kafka.protocol import NO_THROTTLE, make, response_module
from compactlog.server.kafka.topics import KafkaContext

CREATE_PARTITIONS = 37


def check(ctx: KafkaContext, topic: Any) -> None:
    """What a grow of ``topic`` to ``topic.count`` needs of the request itself."""
    current = ctx.partitions(topic.name)
    if topic.count <= current:
        raise KafkaError(
            ErrorCode.invalid_partitions,
            f"topic {topic.name!r} has {current} partition(s): a count of {topic.count} "
            "does not grow it",
        )
    _check_assignments(ctx, topic, current)


def grow(ctx: KafkaContext, topic: Any, validate_only: bool) -> None:
    """Grow (or, ``validate_only``, check growing) one topic to ``topic.count`` here."""
    check(ctx, topic)
    with _partition_counts():
        PartitionedNamespace(ctx.broker_of(topic.name)).add_partitions(
            topic.name, topic.count, validate_only
        )


async def grow_at_front(ctx: KafkaContext, topic: Any, validate_only: bool) -> None:
    """Grow one topic through the front (partition placement: the new partitions go to
    the slots gRPC's AddPartitions gives them); ``validate_only``, checked there on every
    slot the grow touches and made nowhere (``server.admin.validation``)."""
    assert ctx.front is not None
    await ctx.run(check, ctx, topic)
    with _partition_counts():
        await ctx.front.add_partitions(topic.name, topic.count, validate_only)


@contextlib.contextmanager
def _partition_counts() -> Iterator[None]:
    """AddPartitions' refusals of the count (not partitioned, shrinking: a race, over the
    bound) as INVALID_PARTITIONS."""
    try:
        yield
    except InvalidArgument as exc:
        if exc.metadata.get("field") != "partitions":
            raise
        raise KafkaError(ErrorCode.invalid_partitions, str(exc)) from None


def _check_assignments(ctx: KafkaContext, topic: Any, current: int) -> None:
    """Assignments, when given, name for each new partition the one broker to store it."""
    assignments = topic.assignments
    if assignments is None:
        return
    new = topic.count - current
    if len(assignments) != new:
        raise KafkaError(
            ErrorCode.invalid_replica_assignment,
            f"{new} new partition(s) but {len(assignments)} assignment(s)",
        )
    for index, assignment in enumerate(assignments, start=current):
        leader = ctx.cluster.leader_of_partition(topic.name, index)
        if tuple(assignment.broker_ids) != (leader,):
            raise KafkaError(
                ErrorCode.invalid_replica_assignment,
                f"brokers {list(assignment.broker_ids)}: partition {index}'s one broker "
                f"is {leader}",
            )


async def grow_one(
    ctx: KafkaContext, module: Any, topic: Any, validate_only: bool, twice: set[str]
) -> Any:
    try:
        if topic.name in twice:
            raise KafkaError(ErrorCode.invalid_request, f"topic {topic.name!r} named twice")
        if ctx.front is None:
            await ctx.run(grow, ctx, topic, validate_only)
        else:
            await grow_at_front(ctx, topic, validate_only)
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
