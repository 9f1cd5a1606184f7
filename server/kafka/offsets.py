"""OffsetCommit (8) and OffsetFetch (9): a group's committed offsets ARE subscriptions.

CONTRACT section 15: group ``G`` committing offset ``o`` for ``T``/``p`` is the SEGMENTED
subscription ``G`` of that partition, its cursor moved by ``reset_subscription`` (synced
before the answer); a fetch reads it back. The mapping of offsets to mark-delete
positions and the group id rules are in docs/kafka.md ("Consumer groups", "Inside the
listener").
"""

from __future__ import annotations

from typing import Any

from compactlog.errors import CompactlogError
from compactlog.records import MessageId
from compactlog.server.kafka.errors import ErrorCode, KafkaError, code_of
from compactlog.server.kafka.part_errors import NO_OFFSET, committed_offset
from compactlog.server.kafka.protocol import NO_THROTTLE, make, response_module
from compactlog.server.kafka.topics import FORWARDED, KafkaContext
from compactlog.storage.names import check_client_subscription

OFFSET_COMMIT = 8
OFFSET_FETCH = 9


def check_group_id(group_id: str) -> None:
    try:
        check_client_subscription(group_id, "")
    except CompactlogError as exc:
        raise KafkaError(ErrorCode.invalid_group_id, str(exc)) from None


def commit(ctx: KafkaContext, group_id: str, topic: str, partition: int, offset: int) -> None:
    """Move subscription ``group_id`` of ``topic``/``partition`` to ``offset`` (a
    storage thread: the cursor's journal line is synced)."""
    if offset < 0:
        raise KafkaError(ErrorCode.invalid_commit_offset_size, f"offset {offset}")
    log = ctx.log(topic, partition)
    log.open_cursor(group_id, latest=False)
    log.reset_subscription(group_id, MessageId(0, offset))


def committed(ctx: KafkaContext, group_id: str, topic: str, partition: int) -> int:
    """The committed offset of ``group_id`` on ``topic``/``partition``; -1 when none."""
    for cursor in ctx.log(topic, partition).subscriptions():
        if cursor.name == group_id:
            return 0 if cursor.mark_delete is None else cursor.mark_delete.entry_id + 1
    return NO_OFFSET


async def offset_commit(ctx: KafkaContext, request: Any, version: int) -> Any:
    module = response_module(OFFSET_COMMIT, version)
    generation = getattr(request, "generation_id_or_member_epoch", -1)
    try:
        check_group_id(request.group_id)
        group = ctx.group(request.group_id)
        if not FORWARDED.get():  # else checked by the coordinator that sent it on
            group.check_commit(request.member_id, generation)
        refused: ErrorCode | None = None
    except KafkaError as exc:
        refused = exc.code

    async def one(topic: str, p: Any) -> Any:
        code = refused
        if code is None:
            try:
                await ctx.run(
                    commit, ctx, request.group_id, topic, p.partition_index, p.committed_offset
                )
                code = ErrorCode.none
            except Exception as exc:
                code = code_of(exc)
        return make(
            module.OffsetCommitResponsePartition, partition_index=p.partition_index, error_code=code
        )

    topics = []
    for topic in request.topics:
        partitions = tuple([await one(topic.name, p) for p in topic.partitions])
        topics.append(
            make(module.OffsetCommitResponseTopic, name=topic.name, partitions=partitions)
        )
    return make(module.OffsetCommitResponse, throttle_time=NO_THROTTLE, topics=tuple(topics))


async def offset_fetch(ctx: KafkaContext, request: Any, version: int) -> Any:
    module = response_module(OFFSET_FETCH, version)
    try:
        check_group_id(request.group_id)
        ctx.group(request.group_id)  # NOT_COORDINATOR when another broker coordinates it
    except KafkaError as exc:
        return make(
            module.OffsetFetchResponse, throttle_time=NO_THROTTLE, topics=(), error_code=exc.code
        )
    if request.topics is None:  # v2+: every partition the group has an offset on
        wanted = await ctx.run(_every_partition, ctx)
    else:
        wanted = [(t.name, list(t.partition_indexes)) for t in request.topics]
    topics = []
    for name, indexes in wanted:
        partitions = [await _fetch_one(ctx, module, request.group_id, name, i) for i in indexes]
        if request.topics is None:
            partitions = [p for p in partitions if p.committed_offset != NO_OFFSET]
            if not partitions:
                continue
        topics.append(
            make(module.OffsetFetchResponseTopic, name=name, partitions=tuple(partitions))
        )
    return make(
        module.OffsetFetchResponse,
        throttle_time=NO_THROTTLE,
        topics=tuple(topics),
        error_code=ErrorCode.none,
    )


async def _fetch_one(ctx: KafkaContext, module: Any, group_id: str, topic: str, index: int) -> Any:
    try:
        offset, code = await ctx.run(committed, ctx, group_id, topic, index), ErrorCode.none
    except Exception as exc:
        offset, code = NO_OFFSET, code_of(exc)
    return committed_offset(module, index, offset, code)


def _every_partition(ctx: KafkaContext) -> list[tuple[str, list[int]]]:
    """The partitions stored here (with shards, every broker is asked for its own)."""
    return ctx.local_partitions()
