"""Metadata while brokers of a sharded server are down: only their partitions leaderless.

A Kafka cluster shows a down broker's partitions with no leader (LEADER_NOT_AVAILABLE,
leader -1) and every other partition as usual, so clients keep producing to and fetching
from the live ones. Two things stand between a sharded server and that answer. A topic's
entry comes from the broker of ``NAME``'s own slot (``spread``), so while that broker is
down the entry must be built without it: the partition count is read where it is
replicated, the record of ``NAME`` that every slot holding a partition keeps (under
partition placement, in the live brokers' own stores), or else from the count that broker
last showed (``Peers.shown``), or else (more than two brokers: this one may hold no
partition of it and never have seen it) from the live brokers, each asked for the topics
still unknown as a marked Metadata, which it answers from the records in its own stores;
each partition's leader then follows from placement. A Metadata of every topic learns
the down broker's topics from the live brokers' answers: a peer's every-topic answer
lists the topics it keeps a record of too (``metadata``), and an entry whose own broker
is down is kept, one a name. And a partition led by a down
broker is known by its beacon (``Peers.serving``), whichever broker's answer named it:
each leader other than this broker is asked once a Metadata. A topic whose count is
known nowhere answers LEADER_NOT_AVAILABLE whole.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from compactlog.server.kafka.errors import ErrorCode
from compactlog.server.kafka.metadata import METADATA, topic_entry
from compactlog.server.kafka.peers import PEER_FAILURES
from compactlog.server.kafka.protocol import make, request_module, response_module
from compactlog.server.kafka.topics import KafkaContext

NO_LEADER = -1


def remember(ctx: KafkaContext, node: int, share: Any, topics: Any) -> None:
    """Keep broker ``node``'s topics' partition counts as its answer shows them (all of
    them when ``share`` is every topic), for its topics while it is down."""
    assert ctx.peers is not None
    shown = ctx.peers.shown.setdefault(node, {})
    if share is None:
        shown.clear()
    for topic in topics:
        if topic.error_code == ErrorCode.none:
            shown[topic.name] = len(topic.partitions)
        else:
            shown.pop(topic.name, None)


def homed(ctx: KafkaContext, node: int, share: Any, topics: Any) -> list[Any]:
    """Broker ``node``'s answer's topics that it answers for: of an every-topic share
    (which also lists topics it only keeps a record of), those whose own broker it is."""
    if share is not None:
        return list(topics)
    return [t for t in topics if ctx.cluster.leader_of(t.name) == node]


def unlisted(ctx: KafkaContext, recorded: list[Any], down: set[int]) -> list[Any]:
    """The topics of ``recorded`` (every-topic answers' topics, from the records their
    brokers keep) whose own broker is in ``down``, one a name."""
    kept: dict[str, Any] = {}
    for topic in recorded:
        if topic.error_code == ErrorCode.none and ctx.cluster.leader_of(topic.name) in down:
            kept.setdefault(topic.name, topic)
    return list(kept.values())


async def settle(ctx: KafkaContext, version: int, answer: Any, unreached: dict[int, Any]) -> Any:
    """``answer`` with the topics of the brokers in ``unreached`` (node -> the share it
    was asked, None for every topic) built here, and every partition a down broker leads
    leaderless."""
    module = response_module(METADATA, version)
    recorded = ctx.recorded() if unreached else {}
    listed = {t.name for t in answer.topics}
    wanted = {
        name: node
        for node, share in unreached.items()
        for name in _names(ctx, recorded, node, share)
        if name not in listed
    }
    unknown = [n for n, node in wanted.items() if not _count(ctx, recorded, node, n)]
    if unknown:
        recorded = {**recorded, **await _counted_elsewhere(ctx, version, unknown, set(unreached))}
    built = [_entry(ctx, module, recorded, node, name) for name, node in wanted.items()]
    topics = [*answer.topics, *built]
    down = set(unreached) | await _down(ctx, topics, set(unreached))
    if not down:
        return dataclasses.replace(answer, topics=tuple(topics)) if built else answer
    return dataclasses.replace(answer, topics=tuple(_without(module, t, down) for t in topics))


def _names(ctx: KafkaContext, recorded: dict[str, int], node: int, share: Any) -> list[str]:
    """The topics broker ``node`` was asked for: for every topic, those it was last seen
    to hold and those homed there that a store here keeps a record of."""
    if share is not None:
        return [item.name for item in share if item.name is not None]
    assert ctx.peers is not None
    homed = [name for name in recorded if ctx.cluster.leader_of(name) == node]
    return sorted({*ctx.peers.shown.get(node, {}), *homed})


def _count(ctx: KafkaContext, recorded: dict[str, int], node: int, name: str) -> int:
    """Topic ``name``'s count from a record (here, or a live broker's) or from what down
    broker ``node`` last showed; 0 when neither knows it."""
    assert ctx.peers is not None
    return max(recorded.get(name, 0), ctx.peers.shown.get(node, {}).get(name, 0))


def _entry(ctx: KafkaContext, module: Any, recorded: dict[str, int], node: int, name: str) -> Any:
    """Topic ``name`` of down broker ``node``; LEADER_NOT_AVAILABLE whole when its count
    is known nowhere."""
    count = _count(ctx, recorded, node, name)
    code = ErrorCode.none if count else ErrorCode.leader_not_available
    return topic_entry(ctx, module, name, count, code)


async def _counted_elsewhere(
    ctx: KafkaContext, version: int, names: list[str], down: set[int]
) -> dict[str, int]:
    """The counts of ``names`` that the live brokers other than this one keep a record
    of (those holding a partition), the greatest each; asked side by side."""
    assert ctx.peers is not None
    module = request_module(METADATA, version)
    request = make(
        module.MetadataRequest,
        topics=tuple(make(module.MetadataRequestTopic, name=n, topic_id=None) for n in names),
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=False,  # v8 to v10
        include_topic_authorized_operations=False,
    )
    nodes = [n for n in range(len(ctx.cluster.brokers)) if n not in {*down, ctx.cluster.node_id}]
    answers = await asyncio.gather(
        *(ctx.peers.ask(node, METADATA, request, version) for node in nodes),
        return_exceptions=True,
    )
    counts: dict[str, int] = {}
    for answer in answers:
        if isinstance(answer, PEER_FAILURES):
            continue  # down too: its partitions are found leaderless below
        if isinstance(answer, BaseException):
            raise answer
        for topic in answer.topics:
            if topic.error_code == ErrorCode.none and topic.partitions:
                counts[topic.name] = max(counts.get(topic.name, 0), len(topic.partitions))
    return counts


async def _down(ctx: KafkaContext, topics: list[Any], known: set[int]) -> set[int]:
    """The brokers leading some of ``topics``' partitions that do not serve now (those
    ``known`` down, and this one, not asked)."""
    assert ctx.peers is not None
    leaders = {p.leader_id for t in topics for p in t.partitions}
    leaders -= {ctx.cluster.node_id, NO_LEADER, *known}
    nodes = sorted(leaders)
    serving = await asyncio.gather(*(ctx.peers.serving(node) for node in nodes))
    return {node for node, up in zip(nodes, serving, strict=True) if not up}


def _without(module: Any, topic: Any, down: set[int]) -> Any:
    """``topic`` with each partition led by a broker in ``down`` leaderless."""
    if not any(p.leader_id in down for p in topic.partitions):
        return topic
    return dataclasses.replace(
        topic,
        partitions=tuple(
            _leaderless(module, p) if p.leader_id in down else p for p in topic.partitions
        ),
    )


def _leaderless(module: Any, partition: Any) -> Any:
    return make(
        module.MetadataResponsePartition,
        error_code=ErrorCode.leader_not_available,
        partition_index=partition.partition_index,
        leader_id=NO_LEADER,
        leader_epoch=0,
        replica_nodes=partition.replica_nodes,
        isr_nodes=(),
        offline_replicas=partition.replica_nodes,
    )
