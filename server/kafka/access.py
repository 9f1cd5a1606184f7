"""Which role a Kafka request needs, and how a refused one is answered.

Each API does the work of one gRPC call and needs that call's role (CONTRACT section 10,
``server.security.auth.GRANTS``): Produce is ``Log.Publish``, Fetch ``Log.Read``,
CreateTopics ``TopicAdmin.CreateTopic``..., so a principal may do the same over either
door. A refusal is answered in the API's own shape with Kafka's code: every topic (or
partition) of the request gets TOPIC_AUTHORIZATION_FAILED, a group API
GROUP_AUTHORIZATION_FAILED, InitProducerId CLUSTER_AUTHORIZATION_FAILED, and a request
before the SASL login SASL_AUTHENTICATION_FAILED. The connection stays open.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from compactlog.server.kafka.errors import ErrorCode
from compactlog.server.kafka.protocol import (
    NO_THROTTLE,
    error_response,
    load_response,
    make,
    response_module,
)

TOPIC = ErrorCode.topic_authorization_failed
GROUP = ErrorCode.group_authorization_failed
CLUSTER = ErrorCode.cluster_authorization_failed

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


Builder = Callable[[Any, Any, ErrorCode, str], Any]


def refusal(api_key: int, version: int, request: Any, code: ErrorCode, message: str) -> Any:
    """The response refusing ``request`` with ``code`` (None: an acks=0 produce, which
    gets no answer)."""
    build = _BUILDERS.get(api_key)
    if build is None:  # the code in every error field of the response, lists empty
        return error_response(load_response(api_key, version), code)
    return build(response_module(api_key, version), request, code, message)


def _produce(module: Any, request: Any, code: ErrorCode, message: str) -> Any:
    if request.acks == 0:
        return None
    topics = tuple(
        make(
            module.TopicProduceResponse,
            name=topic.name,
            partition_responses=tuple(
                make(
                    module.PartitionProduceResponse,
                    index=part.index,
                    error_code=code,
                    base_offset=-1,
                    log_append_time=None,
                    log_start_offset=-1,
                    record_errors=(),
                    error_message=message,
                )
                for part in topic.partition_data
            ),
        )
        for topic in request.topic_data
    )
    return make(module.ProduceResponse, responses=topics, throttle_time=NO_THROTTLE)


def _create_topics(module: Any, request: Any, code: ErrorCode, message: str) -> Any:
    topics = tuple(
        make(
            module.CreatableTopicResult,
            name=topic.name,
            topic_id=None,
            error_code=code,
            error_message=message,
            topic_config_error_code=0,
            num_partitions=-1,
            replication_factor=-1,
            configs=(),
        )
        for topic in request.topics
    )
    return make(module.CreateTopicsResponse, throttle_time=NO_THROTTLE, topics=topics)


def _delete_topics(module: Any, request: Any, code: ErrorCode, message: str) -> Any:
    names = getattr(request, "topic_names", None)
    if names is None:  # v6: topics by name or id
        pairs = [(t.name, t.topic_id) for t in request.topics]
    else:
        pairs = [(name, None) for name in names]
    results = tuple(
        make(
            module.DeletableTopicResult,
            name=name,
            topic_id=topic_id,
            error_code=code,
            error_message=message,
        )
        for name, topic_id in pairs
    )
    return make(module.DeleteTopicsResponse, throttle_time=NO_THROTTLE, responses=results)


def _delete_records(module: Any, request: Any, code: ErrorCode, message: str) -> Any:
    topics = tuple(
        make(
            module.DeleteRecordsTopicResult,
            name=topic.name,
            partitions=tuple(
                make(
                    module.DeleteRecordsPartitionResult,
                    partition_index=part.partition_index,
                    low_watermark=-1,
                    error_code=code,
                )
                for part in topic.partitions
            ),
        )
        for topic in request.topics
    )
    return make(module.DeleteRecordsResponse, throttle_time=NO_THROTTLE, topics=topics)


def _create_partitions(module: Any, request: Any, code: ErrorCode, message: str) -> Any:
    results = tuple(
        make(
            module.CreatePartitionsTopicResult,
            name=topic.name,
            error_code=code,
            error_message=message,
        )
        for topic in request.topics
    )
    return make(module.CreatePartitionsResponse, throttle_time=NO_THROTTLE, results=results)


def _alter_configs(module: Any, request: Any, code: ErrorCode, message: str) -> Any:
    results = tuple(
        make(
            module.AlterConfigsResourceResponse,
            error_code=code,
            error_message=message,
            resource_type=resource.resource_type,
            resource_name=resource.resource_name,
        )
        for resource in request.resources
    )
    # The legacy AlterConfigs and IncrementalAlterConfigs answer in the same shape.
    answer = getattr(module, "IncrementalAlterConfigsResponse", None) or module.AlterConfigsResponse
    return make(answer, throttle_time=NO_THROTTLE, responses=results)


_BUILDERS: dict[int, Builder] = {
    0: _produce,
    19: _create_topics,
    20: _delete_topics,
    21: _delete_records,
    33: _alter_configs,
    37: _create_partitions,
    44: _alter_configs,
}
