"""DescribeConfigs (key 32): a topic's configs by Kafka's names, the broker's settings and
its loggers (``config_entries``), each with Kafka's config source and, when asked, its
synonyms and documentation.

A topic is read through the same describe as gRPC GetTopic (a partitioned topic: its
partition 0's config, which UpdateTopicConfig keeps equal on every partition); an unknown
or LEDGER topic is UNKNOWN_TOPIC_OR_PARTITION. ``configuration_keys`` keeps only the
keys named (an unknown one is left out, as Kafka does); null or empty lists every key.
"""

from __future__ import annotations

from typing import Any

from compactlog.server.admin.partitioned_topics import PartitionedNamespace
from compactlog.server.broker import TopicDescription
from compactlog.server.kafka.config_entries import (
    ConfigEntry,
    ResourceType,
    broker_entries,
    logger_entries,
    topic_entries,
)
from compactlog.server.kafka.errors import ErrorCode, KafkaError, code_of
from compactlog.server.kafka.protocol import NO_THROTTLE, make, response_module
from compactlog.server.kafka.topics import KafkaContext

DESCRIBE_CONFIGS = 32


def describe_topic(ctx: KafkaContext, name: str) -> TopicDescription:
    """The broker's description of Kafka topic ``name`` (``KafkaError`` when it is none)."""
    ctx.partitions(name)
    broker = ctx.broker_of(name)
    if broker.partitioned.get(name) is not None:
        return PartitionedNamespace(broker).describe(name)
    return broker.describe(name)


def entries_of(ctx: KafkaContext, resource_type: int, name: str) -> list[ConfigEntry]:
    if resource_type == ResourceType.TOPIC:
        desc = describe_topic(ctx, name)
        return topic_entries(ctx.broker_of(name), {k: desc.config[k] for k in desc.overrides})
    if resource_type == ResourceType.BROKER:
        return broker_entries(ctx.settings_broker, name, ctx.cluster.node_id)
    if resource_type == ResourceType.BROKER_LOGGER:
        return logger_entries(name, ctx.cluster.node_id)
    raise KafkaError(ErrorCode.invalid_request, f"unsupported resource type {resource_type}")


def result_entry(module: Any, entry: ConfigEntry, synonyms: bool, docs: bool) -> Any:
    return make(
        module.DescribeConfigsResourceResult,
        name=entry.name,
        value=entry.value,
        read_only=entry.read_only,
        config_source=entry.source,
        is_sensitive=False,
        synonyms=tuple(
            make(module.DescribeConfigsSynonym, name=s.name, value=s.value, source=s.source)
            for s in entry.synonyms
        )
        if synonyms
        else (),
        config_type=entry.type,
        documentation=entry.doc if docs else None,
    )


async def describe_resource(ctx: KafkaContext, module: Any, request: Any, resource: Any) -> Any:
    wanted = resource.configuration_keys
    synonyms = getattr(request, "include_synonyms", False)
    docs = getattr(request, "include_documentation", False)
    try:
        entries = await ctx.run(entries_of, ctx, resource.resource_type, resource.resource_name)
        configs = tuple(
            result_entry(module, e, synonyms, docs)
            for e in entries
            if not wanted or e.name in wanted
        )
        code, message = ErrorCode.none, None
    except Exception as exc:
        configs, code, message = (), code_of(exc), str(exc)
    return make(
        module.DescribeConfigsResult,
        error_code=code,
        error_message=message,
        resource_type=resource.resource_type,
        resource_name=resource.resource_name,
        configs=configs,
    )


async def handle(ctx: KafkaContext, request: Any, version: int) -> Any:
    module = response_module(DESCRIBE_CONFIGS, version)
    results = [await describe_resource(ctx, module, request, r) for r in request.resources]
    return make(module.DescribeConfigsResponse, throttle_time=NO_THROTTLE, results=tuple(results))
