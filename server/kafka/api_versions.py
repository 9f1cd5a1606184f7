"""ApiVersions (key 18): the APIs and versions this listener serves.

The versions are those ``kio`` reads and writes, capped where a later version needs what
compactlog does not keep (topic ids: Fetch v13+, Produce v13+) or adds nothing the
clients use. librdkafka, kafka-python and aiokafka each take the highest version both
sides know. A client asking with a version above ours gets Kafka's answer (KIP-511):
UNSUPPORTED_VERSION in a v0 response that lists what we serve, so it can ask again.

Group coordination (FindCoordinator .. ListGroups) is ``groups`` and ``offsets``;
DescribeConfigs and the config changes ``describe_configs`` and ``alter_configs``.
"""

from __future__ import annotations

from typing import Any

from compactlog.server.kafka import sasl
from compactlog.server.kafka.errors import ErrorCode
from compactlog.server.kafka.protocol import NO_THROTTLE, make, response_module
from compactlog.server.kafka.topics import KafkaContext

API_VERSIONS = 18

# api key -> (min version, max version)
SUPPORTED: dict[int, tuple[int, int]] = {
    0: (3, 9),  # Produce
    1: (4, 12),  # Fetch
    2: (1, 7),  # ListOffsets
    3: (0, 12),  # Metadata
    8: (2, 8),  # OffsetCommit
    9: (1, 7),  # OffsetFetch
    10: (0, 4),  # FindCoordinator
    11: (0, 7),  # JoinGroup
    12: (0, 4),  # Heartbeat
    13: (0, 4),  # LeaveGroup
    14: (0, 5),  # SyncGroup
    15: (0, 5),  # DescribeGroups
    16: (0, 4),  # ListGroups
    18: (0, 4),  # ApiVersions
    19: (2, 7),  # CreateTopics
    20: (1, 6),  # DeleteTopics
    21: (0, 2),  # DeleteRecords
    22: (0, 4),  # InitProducerId
    32: (1, 4),  # DescribeConfigs
    33: (0, 2),  # AlterConfigs
    37: (0, 3),  # CreatePartitions
    44: (0, 1),  # IncrementalAlterConfigs
}


def versions_response(
    version: int, code: ErrorCode = ErrorCode.none, extra: dict[int, tuple[int, int]] | None = None
) -> Any:
    module = response_module(API_VERSIONS, version)
    keys = tuple(
        make(module.ApiVersion, api_key=key, min_version=low, max_version=high)
        for key, (low, high) in sorted({**SUPPORTED, **(extra or {})}.items())
    )
    return make(
        module.ApiVersionsResponse, error_code=code, api_keys=keys, throttle_time=NO_THROTTLE
    )


async def handle(ctx: KafkaContext, request: Any, version: int) -> Any:
    """The APIs served; with ``--auth-tokens``, SASL's two as well."""
    return versions_response(version, extra=None if ctx.door is None else sasl.VERSIONS)


def unsupported(version: int) -> Any:
    """The KIP-511 answer to an ApiVersions version above ours."""
    return versions_response(0, ErrorCode.unsupported_version)
