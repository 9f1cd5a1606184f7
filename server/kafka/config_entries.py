"""Configs in Kafka's terms: what DescribeConfigs lists for a topic, the broker and its
loggers, each entry with Kafka's config source, type and synonyms.

A topic's configs are CONTRACT section 3's SEGMENTED keys, read through the broker's
describe (the effective config and which keys the topic overrides, as gRPC GetTopic
shows). The layers map to Kafka's ``ConfigSource``: a topic override is
DYNAMIC_TOPIC_CONFIG, a value from the server's ``--config`` file STATIC_BROKER_CONFIG,
a built-in default DEFAULT_CONFIG; the synonyms list the layers that hold a value,
strongest first, as Kafka's do. The broker (resource ``"0"``) shows the server-wide
settings, read-only since they are read at start; its loggers (BROKER_LOGGER) show the
levels of the server's Python loggers.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass

from compactlog.server.broker import Broker
from compactlog.server.kafka.errors import ErrorCode, KafkaError
from compactlog.server.kafka.topics import NODE_ID
from compactlog.storage.config import (
    SEGMENTED_KEYS,
    SERVER_KEYS,
    TOPIC_KEYS,
    config_text,
    effective_topic_config,
)
from compactlog.storage.types import TopicKind


class ResourceType(enum.IntEnum):
    """Kafka's ``ConfigResource.Type``."""

    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8


class ConfigSource(enum.IntEnum):
    """Kafka's ``DescribeConfigsResponse.ConfigSource`` (KIP-226)."""

    DYNAMIC_TOPIC_CONFIG = 1
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6


class ConfigType(enum.IntEnum):
    """Kafka's ``ConfigDef.Type`` as DescribeConfigs v3+ sends it (KIP-569)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    LONG = 5
    DOUBLE = 6
    LIST = 7


# Kafka's types of the topic keys (TopicConfig); the others follow their default's type.
_TOPIC_TYPES = {
    "cleanup.policy": ConfigType.LIST,
    "segment.bytes": ConfigType.INT,
    "segment.index.bytes": ConfigType.INT,
    "index.interval.bytes": ConfigType.INT,
    "max.message.bytes": ConfigType.INT,
}
LIST_KEYS = frozenset(k for k, t in _TOPIC_TYPES.items() if t == ConfigType.LIST)


def config_type(name: str, default: object) -> ConfigType:
    if name in _TOPIC_TYPES:
        return _TOPIC_TYPES[name]
    if isinstance(default, bool):
        return ConfigType.BOOLEAN
    if isinstance(default, int):
        return ConfigType.LONG
    if isinstance(default, float):
        return ConfigType.DOUBLE
    return ConfigType.STRING


@dataclass(frozen=True)
class Synonym:
    name: str
    value: str
    source: ConfigSource


@dataclass(frozen=True)
class ConfigEntry:
    """One described config: its value, where the value comes from, the layers below."""

    name: str
    value: str
    source: ConfigSource
    read_only: bool
    type: ConfigType
    doc: str
    synonyms: tuple[Synonym, ...]


def topic_entries(broker: Broker, overrides: dict[str, str]) -> list[ConfigEntry]:
    """Every SEGMENTED key of a topic with ``overrides`` (its own values)."""
    server = broker.settings.defaults_for(TopicKind.SEGMENTED)
    builtin = effective_topic_config(TopicKind.SEGMENTED, {})
    entries = []
    for name, key in SEGMENTED_KEYS.items():
        layers = [
            (values[name], source)
            for values, source in (
                (overrides, ConfigSource.DYNAMIC_TOPIC_CONFIG),
                (server, ConfigSource.STATIC_BROKER_CONFIG),
                (builtin, ConfigSource.DEFAULT_CONFIG),
            )
            if name in values
        ]
        value, source = layers[0]
        entries.append(
            ConfigEntry(
                name=name,
                value=value,
                source=source,
                read_only=False,
                type=config_type(name, key.default),
                doc=key.doc,
                synonyms=tuple(Synonym(name, v, s) for v, s in layers),
            )
        )
    return entries


def broker_entries(broker: Broker, resource_name: str, node_id: int = NODE_ID) -> list[ConfigEntry]:
    """The broker's settings: ``"0"`` (this broker) every server-wide key and the topic
    defaults of the ``--config`` file; ``""`` (the cluster's dynamic defaults) none, as
    nothing is set at run time. Read-only: the file is read at start."""
    _check_broker(resource_name, node_id)
    if resource_name == "":
        return []
    settings = broker.settings
    entries = []
    for name, key in SERVER_KEYS.items():
        value = config_text(getattr(settings, name.replace(".", "_")))
        default = config_text(key.default)
        source = (
            ConfigSource.DEFAULT_CONFIG if value == default else ConfigSource.STATIC_BROKER_CONFIG
        )
        entries.append(_fixed(name, value, source, config_type(name, key.default), key.doc))
    for name, value in sorted((settings.topic_defaults or {}).items()):
        key = TOPIC_KEYS[TopicKind.SEGMENTED].get(name) or TOPIC_KEYS[TopicKind.LEDGER][name]
        source = ConfigSource.STATIC_BROKER_CONFIG
        entries.append(_fixed(name, value, source, config_type(name, key.default), key.doc))
    return entries


_KAFKA_LEVELS = {"WARNING": "WARN", "CRITICAL": "FATAL", "NOTSET": "INFO"}


def logger_entries(resource_name: str, node_id: int = NODE_ID) -> list[ConfigEntry]:
    """The server's loggers (``root`` and ``compactlog...``) and their effective levels,
    in Kafka's level names."""
    _check_broker(resource_name, node_id)
    loggers = [logging.getLogger()] + [
        found
        for name, found in sorted(logging.Logger.manager.loggerDict.items())
        if name.startswith("compactlog") and isinstance(found, logging.Logger)
    ]
    entries = []
    for found in loggers:
        level = logging.getLevelName(found.getEffectiveLevel())
        value = _KAFKA_LEVELS.get(level, level)
        source = ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG
        entries.append(_fixed(found.name, value, source, ConfigType.STRING, ""))
    return entries


def _fixed(name: str, value: str, source: ConfigSource, kind: ConfigType, doc: str) -> ConfigEntry:
    return ConfigEntry(name, value, source, True, kind, doc, (Synonym(name, value, source),))


def _check_broker(resource_name: str, node_id: int) -> None:
    """A broker resource names this broker (``"0"`` without shards, a shard's own id
    with them) or, for the cluster, ``""``."""
    if resource_name not in ("", str(node_id)):
        raise KafkaError(
            ErrorCode.invalid_request,
            f"unexpected broker id {resource_name!r}: this broker is {node_id}",
        )
