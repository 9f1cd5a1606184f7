"""Which role a Kafka request needs, and how a refused one is answered.

Each API does the work of one gRPC call and needs that call's role (CONTRACT section 10,
``server.security.auth.GRANTS``): Produce is ``Log.Publish``, Fetch ``Log.Read``,
CreateTopics ``TopicAdmin.CreateTopic``..., so a principal may do the same over either
door. A refusal is answered in the API's own shape (``part_errors``) with Kafka's code:
every topic (or partition) of the request gets TOPIC_AUTHORIZATION_FAILED, a group API
GROUP_AUTHORIZATION_FAILED, InitProducerId CLUSTER_AUTHORIZATION_FAILED, and a request
before the SASL login SASL_AUTHENTICATION_FAILED. The connection stays open.
"""

from __future__ import annotations

from typing import Any

from compactlog.server.kafka import part_errors
from compactlog.server.kafka.errors import ErrorCode
from compactlog.server.kafka.protocol import error_response, load_response

TOPIC = ErrorCode.topic_authorization_failed
GROUP = ErrorCode.group_authorization_failed
CLUSTER = ErrorCode.cluster_authorization_failed
OFFSET_FETCH = 9

# api key -> (the gRPC call whose role it needs, the code a refusal answers with);
# an API not named needs what an unnamed gRPC call does: admin.
CALLS: dict[int, tuple[str, ErrorCode]] = {
    0: ("Log.Publish", TOPIC),  # Produce
    1: ("Log.Read", TOPIC),  # Fetch
    2: ("Log.GetLastMessageId", TOPIC),  # ListOffsets
    3: ("TopicAdmin.ListTopics", TOPIC),  # Metadata
    8: ("Log.Acknowledge", GROUP),  # OffsetCommit: moves the group's subscription
    9: ("Log.Consume", GROUP),  # OffsetFetch
    10: ("Log.Consume", GROUP),  # FindCoordinator
    11: ("Log.Consume", GROUP),  # JoinGroup
    12: ("Log.Consume", GROUP),  # Heartbeat
    13: ("Log.CloseConsumer", GROUP),  # LeaveGroup
    14: ("Log.Consume", GROUP),  # SyncGroup
    15: ("Log.Consume", GROUP),  # DescribeGroups
    16: ("Log.Consume", GROUP),  # ListGroups
    19: ("TopicAdmin.CreateTopic", TOPIC),  # CreateTopics
    20: ("TopicAdmin.DeleteTopic", TOPIC),  # DeleteTopics
    21: ("TopicAdmin.DeleteRecords", TOPIC),  # DeleteRecords
    22: ("Log.Publish", CLUSTER),  # InitProducerId: an idempotent producer's first call
    32: ("TopicAdmin.GetTopic", TOPIC),  # DescribeConfigs
    33: ("TopicAdmin.UpdateTopicConfig", TOPIC),  # AlterConfigs (the legacy call)
    37: ("TopicAdmin.AddPartitions", TOPIC),  # CreatePartitions
    44: ("TopicAdmin.UpdateTopicConfig", TOPIC),  # IncrementalAlterConfigs
}
OPEN = frozenset({18})  # ApiVersions: asked before the login, as Kafka's brokers allow


def call_of(api_key: int) -> tuple[str, ErrorCode]:
    return CALLS.get(api_key, (f"Kafka.Api{api_key}", CLUSTER))


def refusal(api_key: int, version: int, request: Any, code: ErrorCode, message: str) -> Any:
    """The response refusing ``request`` with ``code`` (None: an acks=0 produce, which
    gets no answer): each part refused where the API answers by part, else the code in
    every error field (OffsetFetch: the group's, as Kafka refuses a group whole)."""
    if api_key == OFFSET_FETCH or not part_errors.by_part(api_key):
        return error_response(load_response(api_key, version), code)
    return part_errors.answer(api_key, version, request, code, message)
