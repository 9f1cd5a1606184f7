"""Group coordination (FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
OffsetCommit, OffsetFetch): not served yet, answered COORDINATOR_NOT_AVAILABLE in each
API's own shape (per partition where the API has no top-level error), so a client's
group calls fail and retry while ``assign()`` consumers, producers and admin calls work.
The next step maps a group ``G`` to the SEGMENTED subscription ``G`` (CONTRACT 15).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from compactlog.server.kafka.errors import ErrorCode
from compactlog.server.kafka.protocol import (
    NO_THROTTLE,
    error_response,
    load_response,
    make,
    response_module,
)
from compactlog.server.kafka.topics import KafkaContext

FIND_COORDINATOR = 10
OFFSET_COMMIT = 8
OFFSET_FETCH = 9
NOT_YET = ErrorCode.coordinator_not_available
Handler = Callable[[KafkaContext, Any, int], Awaitable[Any]]
MESSAGE = "consumer groups are not served yet by compactlog's Kafka listener"


def not_yet(api_key: int) -> Handler:
    """A handler answering every version of ``api_key`` with its top-level error."""

    async def handle(ctx: KafkaContext, request: Any, version: int) -> Any:
        return error_response(load_response(api_key, version), NOT_YET)

    return handle


async def find_coordinator(ctx: KafkaContext, request: Any, version: int) -> Any:
    module = response_module(FIND_COORDINATOR, version)
    if version < 4:
        return error_response(module.FindCoordinatorResponse, NOT_YET)
    coordinators = tuple(
        make(
            module.Coordinator,
            key=key,
            node_id=-1,
            host="",
            port=-1,
            error_code=NOT_YET,
            error_message=MESSAGE,
        )
        for key in request.coordinator_keys
    )
    return make(
        module.FindCoordinatorResponse, throttle_time=NO_THROTTLE, coordinators=coordinators
    )


async def offset_commit(ctx: KafkaContext, request: Any, version: int) -> Any:
    module = response_module(OFFSET_COMMIT, version)
    topics = tuple(
        make(
            module.OffsetCommitResponseTopic,
            name=topic.name,
            partitions=tuple(
                make(
                    module.OffsetCommitResponsePartition,
                    partition_index=p.partition_index,
                    error_code=NOT_YET,
                )
                for p in topic.partitions
            ),
        )
        for topic in request.topics
    )
    return make(module.OffsetCommitResponse, throttle_time=NO_THROTTLE, topics=topics)


async def offset_fetch(ctx: KafkaContext, request: Any, version: int) -> Any:
    module = response_module(OFFSET_FETCH, version)
    topics = tuple(
        make(
            module.OffsetFetchResponseTopic,
            name=topic.name,
            partitions=tuple(
                make(
                    module.OffsetFetchResponsePartition,
                    partition_index=index,
                    committed_offset=-1,
                    committed_leader_epoch=-1,
                    metadata=None,
                    error_code=NOT_YET,
                )
                for index in topic.partition_indexes
            ),
        )
        for topic in request.topics or ()
    )
    return make(
        module.OffsetFetchResponse, throttle_time=NO_THROTTLE, topics=topics, error_code=NOT_YET
    )
