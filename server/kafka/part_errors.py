"""A request answered with one error code in each of its parts, in the API's own shape.

Kafka answers most requests by part (topic, partition, config resource), so a client
keeps what succeeded and retries or reports the rest. Two callers need the same code in
every part of a request: a refusal (``access``: TOPIC_AUTHORIZATION_FAILED...) and a
share of a split request whose broker cannot be reached (``spread``: REQUEST_TIMED_OUT,
COORDINATOR_NOT_AVAILABLE...). One builder an API builds that answer from the request.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from compactlog.server.kafka.errors import ErrorCode
from compactlog.server.kafka.protocol import NO_THROTTLE, make, response_module

Builder = Callable[[Any, Any, ErrorCode, str], Any]
NO_OFFSET = -1


def by_part(api_key: int) -> bool:
    """Whether ``answer`` can build this API's answer part by part."""
    return api_key in _BUILDERS


def answer(api_key: int, version: int, request: Any, code: ErrorCode, message: str) -> Any:
    """The response to ``request`` giving every part ``code`` and ``message`` (None: an
    acks=0 produce, which gets no answer)."""
    return _BUILDERS[api_key](response_module(api_key, version), request, code, message)


def topic_result(
    module: Any, name: str, code: ErrorCode, message: str | None, partitions: int = -1
) -> Any:
    """One topic's CreateTopics answer (``partitions`` -1 when it was not created)."""
    return make(
        module.CreatableTopicResult,
        name=name,
        topic_id=None,
        error_code=code,
        error_message=message,
        topic_config_error_code=0,
        num_partitions=partitions,
        replication_factor=1 if code == ErrorCode.none else -1,
        configs=(),
    )


def committed_offset(module: Any, index: int, offset: int, code: ErrorCode) -> Any:
    """One partition's OffsetFetch answer (``NO_OFFSET`` when none is committed)."""
    return make(
        module.OffsetFetchResponsePartition,
        partition_index=index,
        committed_offset=offset,
        committed_leader_epoch=-1,
        metadata="",
        error_code=code,
    )


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
    topics = tuple(topic_result(module, topic.name, code, message) for topic in request.topics)
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


def _offset_commit(module: Any, request: Any, code: ErrorCode, message: str) -> Any:
    topics = tuple(
        make(
            module.OffsetCommitResponseTopic,
            name=topic.name,
            partitions=tuple(
                make(
                    module.OffsetCommitResponsePartition,
                    partition_index=part.partition_index,
                    error_code=code,
                )
                for part in topic.partitions
            ),
        )
        for topic in request.topics
    )
    return make(module.OffsetCommitResponse, throttle_time=NO_THROTTLE, topics=topics)


def _offset_fetch(module: Any, request: Any, code: ErrorCode, message: str) -> Any:
    topics = tuple(
        make(
            module.OffsetFetchResponseTopic,
            name=topic.name,
            partitions=tuple(
                committed_offset(module, index, NO_OFFSET, code)
                for index in topic.partition_indexes
            ),
        )
        for topic in request.topics or ()
    )
    return make(
        module.OffsetFetchResponse,
        throttle_time=NO_THROTTLE,
        topics=topics,
        error_code=ErrorCode.none,
    )


def _describe_configs(module: Any, request: Any, code: ErrorCode, message: str) -> Any:
    results = tuple(
        make(
            module.DescribeConfigsResult,
            error_code=code,
            error_message=message,
            resource_type=resource.resource_type,
            resource_name=resource.resource_name,
            configs=(),
        )
        for resource in request.resources
    )
    return make(module.DescribeConfigsResponse, throttle_time=NO_THROTTLE, results=results)


_BUILDERS: dict[int, Builder] = {
    0: _produce,
    8: _offset_commit,
    9: _offset_fetch,
    19: _create_topics,
    20: _delete_topics,
    21: _delete_records,
    32: _describe_configs,
    33: _alter_configs,
    37: _create_partitions,
    44: _alter_configs,
}
