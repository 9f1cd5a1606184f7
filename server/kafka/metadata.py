"""Metadata (key 3): the brokers and who leads each partition of the topics asked for
(a server without shards: one broker, this listener at its advertised address, leading
every partition; with ``--shards N``: each partition's leader is the broker storing it,
``Cluster.leader_of_partition``). Topics are looked up, never created (no
``auto.create.topics``): an unknown or LEDGER topic answers UNKNOWN_TOPIC_OR_PARTITION.
A peer's request for every topic is also answered with the partitioned topics whose own
broker is another but a store here keeps a record of, so that while that broker is down
the asking broker still lists them (``leaderless``; it keeps one entry a name).
"""

from __future__ import annotations

from typing import Any

from compactlog.server.kafka.errors import ErrorCode, KafkaError
from compactlog.server.kafka.protocol import NO_THROTTLE, make, response_module
from compactlog.server.kafka.topics import FORWARDED, KafkaContext

METADATA = 3
CLUSTER_ID = "compactlog"


def requested_names(ctx: KafkaContext, request: Any, version: int) -> list[str]:
    """The names asked for; every Kafka topic for null (v1+) or an empty list (v0), and
    for a peer every topic recorded here too."""
    topics = request.topics
    if topics is None or (version == 0 and not topics):
        if FORWARDED.get():
            return sorted({*ctx.topic_names(), *ctx.recorded()})
        return ctx.topic_names()
    return [t.name for t in topics if t.name is not None]


def topic_metadata(ctx: KafkaContext, module: Any, name: str) -> Any:
    try:
        count = ctx.partitions(name)
        code = ErrorCode.none
    except KafkaError as exc:
        count, code = 0, exc.code
    return topic_entry(ctx, module, name, count, code)


def topic_entry(ctx: KafkaContext, module: Any, name: str, count: int, code: ErrorCode) -> Any:
    """Topic ``name``'s entry: ``count`` partitions, each led by the broker storing it."""
    partitions = tuple(
        make(
            module.MetadataResponsePartition,
            error_code=ErrorCode.none,
            partition_index=i,
            leader_id=(leader := ctx.cluster.leader_of_partition(name, i)),
            leader_epoch=0,
            replica_nodes=(leader,),
            isr_nodes=(leader,),
            offline_replicas=(),
        )
        for i in range(count)
    )
    return make(
        module.MetadataResponseTopic,
        error_code=code,
        name=name,
        topic_id=None,
        is_internal=False,
        partitions=partitions,
    )


async def handle(ctx: KafkaContext, request: Any, version: int) -> Any:
    module = response_module(METADATA, version)
    brokers = tuple(
        make(module.MetadataResponseBroker, node_id=node, host=host, port=port)
        for node, (host, port) in enumerate(ctx.cluster.brokers)
    )
    topics = tuple(
        topic_metadata(ctx, module, name) for name in requested_names(ctx, request, version)
    )
    return make(
        module.MetadataResponse,
        throttle_time=NO_THROTTLE,
        brokers=brokers,
        cluster_id=CLUSTER_ID,
        controller_id=0,
        topics=topics,
    )
