"""The handler of every API this listener serves, by API key; ``api_versions.SUPPORTED``
holds their versions (the two tables must name the same keys)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from compactlog.server.kafka import (
    alter_configs,
    api_versions,
    create_partitions,
    create_topics,
    delete_records,
    delete_topics,
    describe_configs,
    fetch,
    groups,
    list_offsets,
    metadata,
    offsets,
    produce,
    producers,
)
from compactlog.server.kafka.topics import KafkaContext

Handler = Callable[[KafkaContext, Any, int], Awaitable[Any]]

HANDLERS: dict[int, Handler] = {
    0: produce.handle,
    1: fetch.handle,
    2: list_offsets.handle,
    3: metadata.handle,
    8: offsets.offset_commit,
    9: offsets.offset_fetch,
    10: groups.find_coordinator,
    11: groups.join_group,
    12: groups.heartbeat,
    13: groups.leave_group,
    14: groups.sync_group,
    15: groups.describe_groups,
    16: groups.list_groups,
    18: api_versions.handle,
    19: create_topics.handle,
    20: delete_topics.handle,
    21: delete_records.handle,
    22: producers.handle,
    32: describe_configs.handle,
    33: alter_configs.handle_legacy,
    37: create_partitions.handle,
    44: alter_configs.handle_incremental,
}
assert HANDLERS.keys() == api_versions.SUPPORTED.keys()
