"""Requests that span the brokers of a sharded server, split by owner and merged.

With ``serve --shards N`` each shard is a Kafka broker that stores some topics
(docs/kafka.md, "With --shards N"). A Metadata, an admin request or a coordinator's
OffsetCommit or OffsetFetch may name topics other brokers store: this broker answers
its share itself and sends each other share, as the same request and version, to the
topic's broker (``peers``), then joins the answers' lists. Topics go to the broker of
their own slot; the partitions an OffsetCommit or OffsetFetch names each go to the
broker storing that partition (under partition placement one topic's partitions live
on several brokers), and the answers' topics are joined again by name. A null list
(Metadata's every topic, OffsetFetch's every partition) goes to every broker. A request
marked as sent by another broker is answered here alone. Produce, Fetch, ListOffsets
and DeleteRecords are not split: each partition's leader answers it (others say
NOT_LEADER_OR_FOLLOWER).

A broker that cannot be reached (down, restarting: ``peers`` says so at once) fails only
its share, as a Kafka cluster fails only a down broker's partitions: Metadata shows its
partitions leaderless and every other partition led as usual (``leaderless``), an admin
request answers each of its topics REQUEST_TIMED_OUT, an OffsetCommit each of its
partitions COORDINATOR_NOT_AVAILABLE and an OffsetFetch UNSTABLE_OFFSET_COMMIT, every
other part as usual (the codes' reasons: docs/kafka.md).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from typing import Any

from compactlog.server.kafka import leaderless, part_errors
from compactlog.server.kafka.config_entries import ResourceType
from compactlog.server.kafka.errors import ErrorCode, KafkaError
from compactlog.server.kafka.handlers import HANDLERS
from compactlog.server.kafka.offsets import check_group_id
from compactlog.server.kafka.peers import PEER_FAILURES
from compactlog.server.kafka.topics import FORWARDED, KafkaContext

METADATA, OFFSET_COMMIT, OFFSET_FETCH = 3, 8, 9
# what the parts of a broker that cannot be reached answer, by API (else REQUEST_TIMED_OUT)
UNREACHED = {
    OFFSET_COMMIT: ErrorCode.coordinator_not_available,
    OFFSET_FETCH: ErrorCode.unstable_offset_commit,
}


def _topic(item: Any) -> str | None:
    return item if isinstance(item, str) else item.name


def _resource(item: Any) -> str | None:
    return item.resource_name if item.resource_type == ResourceType.TOPIC else None


# api key -> (the request's list, the response's list, the topic an item names)
SPLITS: dict[int, tuple[str, str, Callable[[Any], str | None]]] = {
    3: ("topics", "topics", _topic),  # Metadata
    8: ("topics", "topics", _topic),  # OffsetCommit
    9: ("topics", "topics", _topic),  # OffsetFetch
    19: ("topics", "topics", _topic),  # CreateTopics
    20: ("topics", "responses", _topic),  # DeleteTopics v6 (topic_names before: below)
    32: ("resources", "results", _resource),  # DescribeConfigs
    33: ("resources", "responses", _resource),  # AlterConfigs
    37: ("topics", "results", _topic),  # CreatePartitions
    44: ("resources", "responses", _resource),  # IncrementalAlterConfigs
}
# api key -> (a topic item's list of partitions, a partition's index): split by partition
PARTS: dict[int, tuple[str, Callable[[Any], int]]] = {
    OFFSET_COMMIT: ("partitions", lambda part: int(part.partition_index)),
    OFFSET_FETCH: ("partition_indexes", int),
}


async def handle(
    ctx: KafkaContext, api_key: int, request: Any, version: int, forwarded: bool
) -> Any:
    """The response to ``request``: split over the brokers when it spans them."""
    token = FORWARDED.set(forwarded)
    try:
        if ctx.peers is None or forwarded or api_key not in SPLITS:
            return await HANDLERS[api_key](ctx, request, version)
        answer, unreached = await _spread(ctx, api_key, request, version)
        if api_key == METADATA:
            return await leaderless.settle(ctx, version, answer, unreached)
        return answer
    finally:
        FORWARDED.reset(token)


def _shares(
    ctx: KafkaContext, api_key: int, items: Any, name_of: Callable[[Any], str | None]
) -> dict[int, Any]:
    """The items each broker answers (``None``, every item, goes to every broker)."""
    if items is None:
        return dict.fromkeys(range(len(ctx.cluster.brokers)))
    shares: dict[int, list[Any]] = {}
    for item in items:
        for node, share in _owners(ctx, api_key, item, name_of(item)):
            shares.setdefault(node, []).append(share)
    return {node: tuple(share) for node, share in shares.items()}


def _owners(ctx: KafkaContext, api_key: int, item: Any, name: str | None) -> list[tuple[int, Any]]:
    """``item`` as the brokers answer it: whole by its topic's broker, or (``PARTS``)
    cut into one item a broker storing some of its partitions."""
    cluster = ctx.cluster
    if name is None:
        return [(cluster.node_id, item)]
    field, index_of = PARTS.get(api_key, ("", int))
    parts = getattr(item, field) if field else ()
    if not parts:
        return [(cluster.leader_of(name), item)]
    by_node: dict[int, list[Any]] = {}
    for part in parts:
        by_node.setdefault(cluster.leader_of_partition(name, index_of(part)), []).append(part)
    return [(node, dataclasses.replace(item, **{field: tuple(p)})) for node, p in by_node.items()]


def _joined(api_key: int, items: list[Any]) -> list[Any]:
    """The answers' topics, one a name: a topic cut by partition (``PARTS``) is whole
    again, its partitions in the order the brokers answered."""
    if api_key not in PARTS:
        return items
    by_name: dict[str, Any] = {}
    for item in items:
        seen = by_name.get(item.name)
        if seen is not None:
            item = dataclasses.replace(seen, partitions=(*seen.partitions, *item.partitions))
        by_name[item.name] = item
    return list(by_name.values())


async def _spread(
    ctx: KafkaContext, api_key: int, request: Any, version: int
) -> tuple[Any, dict[int, Any]]:
    """The merged answer, and the shares of the brokers that could not be reached (by
    node) whose parts a Metadata answer builds itself (``leaderless``)."""
    asked, answered, name_of = SPLITS[api_key]
    if not hasattr(request, asked):  # DeleteTopics before v6: a list of names
        asked = "topic_names"
    shares = _shares(ctx, api_key, getattr(request, asked), name_of)
    if set(shares) <= {ctx.cluster.node_id} or _refused_here(ctx, api_key, request):
        return await HANDLERS[api_key](ctx, request, version), {}
    nodes = sorted(shares)
    answers = await asyncio.gather(
        *(
            _ask(ctx, node, api_key, dataclasses.replace(request, **{asked: shares[node]}), version)
            for node in nodes
        ),
        return_exceptions=True,
    )
    merged: list[Any] = []
    recorded: list[Any] = []  # every-topic Metadata answers' topics homed elsewhere
    unreached: dict[int, Any] = {}
    base: Any = None
    whole: ErrorCode | None = None  # an error for the whole answer (OffsetFetch's every part)
    for node, answer in zip(nodes, answers, strict=True):
        if isinstance(answer, BaseException):
            if node == ctx.cluster.node_id or not isinstance(answer, PEER_FAILURES):
                raise answer
            if api_key == METADATA:
                unreached[node] = shares[node]
            elif shares[node] is None:  # OffsetFetch of every partition: which are its?
                whole = ErrorCode.coordinator_load_in_progress
            else:
                share = dataclasses.replace(request, **{asked: shares[node]})
                merged += _unanswered(api_key, version, share, answered, node, answer)
            continue
        base = base if base is not None else answer
        if api_key == METADATA:
            mine = leaderless.homed(ctx, node, shares[node], answer.topics)
            leaderless.remember(ctx, node, shares[node], mine)
            merged += mine
            recorded += [t for t in answer.topics if shares[node] is None]
            continue
        merged += getattr(answer, answered)
    if base is None:  # no broker answered: this one's own answer with the errors
        base = await HANDLERS[api_key](ctx, dataclasses.replace(request, **{asked: ()}), version)
    if whole is not None:
        return dataclasses.replace(base, **{answered: (), "error_code": whole}), unreached
    if recorded and unreached:
        merged += leaderless.unlisted(ctx, recorded, set(unreached))
    return dataclasses.replace(base, **{answered: tuple(_joined(api_key, merged))}), unreached


def _unanswered(
    api_key: int, version: int, share: Any, answered: str, node: int, failure: BaseException
) -> list[Any]:
    """The parts of ``share`` answered with the error of a broker that did not answer."""
    code = UNREACHED.get(api_key, ErrorCode.request_timed_out)
    reason = str(failure) or type(failure).__name__
    message = f"Kafka broker {node}, which stores it, cannot be reached: {reason}"
    return list(getattr(part_errors.answer(api_key, version, share, code, message), answered))


async def _ask(ctx: KafkaContext, node: int, api_key: int, request: Any, version: int) -> Any:
    if node == ctx.cluster.node_id:
        return await HANDLERS[api_key](ctx, request, version)
    assert ctx.peers is not None
    return await ctx.peers.ask(node, api_key, request, version)


def _refused_here(ctx: KafkaContext, api_key: int, request: Any) -> bool:
    """Whether this broker refuses a group's OffsetCommit or OffsetFetch whole (it does
    not coordinate the group; a commit from no member of its generation) before any
    part of it is sent on: the handler then answers every partition with the refusal."""
    if api_key not in (OFFSET_COMMIT, OFFSET_FETCH):
        return False
    try:
        check_group_id(request.group_id)
        group = ctx.group(request.group_id)
        if api_key == OFFSET_COMMIT:
            generation = getattr(request, "generation_id_or_member_epoch", -1)
            group.check_commit(request.member_id, generation)
    except KafkaError:
        return True
    return False
