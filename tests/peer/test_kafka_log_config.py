"""Port of Kafka's ``LogConfigTest`` (storage, org.apache.kafka.storage.internals.log):
behaviour only, through a real server's topic configs on SEGMENTED topics. Every value
Kafka's LogConfig refuses is refused at CreateTopic and at UpdateTopicConfig with
INVALID_CONFIG naming the key, the lag pair is checked on the merged config, and the
defaults are Kafka's. Keys Kafka has and compactlog does not (replication, remote
storage, compression levels, throttled replicas) have no meaning on one node."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from compactlog.client import Client
from compactlog.errors import InvalidConfig
from tests.conftest import ServerProcess

LONG_MAX = 2**63 - 1

# LogConfigTest.invalidValuesForProp, for the keys compactlog has.
INVALID = {
    "cleanup.policy": ["true", "foobar"],
    "min.cleanable.dirty.ratio": ["not_a_number", "-0.1", "1.2"],
    "retention.ms": ["not_a_number"],
    "retention.bytes": ["not_a_number"],
    **{
        key: ["not_a_number", "-1"]
        for key in (
            "segment.bytes",
            "segment.ms",
            "segment.index.bytes",
            "index.interval.bytes",
            "min.compaction.lag.ms",
            "max.compaction.lag.ms",
            "delete.retention.ms",
            "file.delete.delay.ms",
            "flush.messages",
            "flush.ms",
            "max.message.bytes",
        )
    },
}

# LogConfig's defaults (TopicConfig / ServerLogConfigs), as GetTopic shows them.
KAFKA_DEFAULTS = {
    "cleanup.policy": "delete",
    "segment.bytes": str(1024 * 1024 * 1024),
    "segment.ms": str(7 * 24 * 3600 * 1000),
    "segment.index.bytes": str(10 * 1024 * 1024),
    "index.interval.bytes": "4096",
    "retention.ms": str(7 * 24 * 3600 * 1000),
    "retention.bytes": "-1",
    "min.cleanable.dirty.ratio": "0.5",
    "min.compaction.lag.ms": "0",
    "max.compaction.lag.ms": str(LONG_MAX),
    "delete.retention.ms": str(24 * 3600 * 1000),
    "file.delete.delay.ms": "60000",
    "flush.messages": str(LONG_MAX),
    "flush.ms": str(LONG_MAX),
    "max.message.bytes": "1048588",
}


@pytest.fixture(scope="module")
def client(module_server: ServerProcess) -> Iterator[Client]:
    with Client(module_server.address) as c:
        yield c


@pytest.mark.parametrize(
    ("key", "value"), [(k, v) for k, values in INVALID.items() for v in values]
)
def test_from_props_invalid(client: Client, unique_topic: str, key: str, value: str) -> None:
    """LogConfigTest.testFromPropsInvalid: at creation and at an update, naming the key."""
    with pytest.raises(InvalidConfig, match=key.replace(".", r"\.")) as created:
        client.create_topic(unique_topic, "segmented", {key: value})
    assert created.value.metadata.get("key") == key
    client.create_topic(unique_topic, "segmented")
    with pytest.raises(InvalidConfig, match=key.replace(".", r"\.")):
        client.update_topic_config(unique_topic, {key: value})
    assert client.get_topic(unique_topic).config[key] == KAFKA_DEFAULTS[key]


def test_from_props_empty_gives_kafkas_defaults(client: Client, unique_topic: str) -> None:
    """LogConfigTest.testFromPropsEmpty (and LogConfig's defaults): a topic made with no
    config has Kafka's default for every key both share."""
    config = client.create_topic(unique_topic, "segmented").config
    assert {k: config[k] for k in KAFKA_DEFAULTS} == KAFKA_DEFAULTS


def test_invalid_compaction_lag_config(client: Client, unique_topic: str) -> None:
    """LogConfigTest.testInvalidCompactionLagConfig: max.compaction.lag.ms below
    min.compaction.lag.ms is refused, together or against the topic's merged config."""
    lags = {"max.compaction.lag.ms": "100", "min.compaction.lag.ms": "200"}
    with pytest.raises(InvalidConfig):
        client.create_topic(unique_topic, "segmented", lags)
    client.create_topic(unique_topic, "segmented", {"min.compaction.lag.ms": "200"})
    with pytest.raises(InvalidConfig):
        client.update_topic_config(unique_topic, {"max.compaction.lag.ms": "100"})
    info = client.update_topic_config(unique_topic, {"max.compaction.lag.ms": "200"})
    assert info.config["max.compaction.lag.ms"] == "200"


def test_valid_values_round_trip(client: Client, unique_topic: str) -> None:
    """The other side of testFromPropsInvalid: the edges Kafka accepts are accepted and
    read back as set."""
    edges = {
        "cleanup.policy": "compact,delete",
        "min.cleanable.dirty.ratio": "1.0",
        "retention.ms": "-1",
        "retention.bytes": "-1",
        "segment.bytes": "14",
        "segment.ms": "1",
        "index.interval.bytes": "0",
        "min.compaction.lag.ms": "0",
        "delete.retention.ms": "0",
        "file.delete.delay.ms": "0",
        "flush.messages": "1",
        "flush.ms": "0",
        "max.message.bytes": "0",
    }
    config = client.create_topic(unique_topic, "segmented", edges).config
    assert {k: config[k] for k in edges} == edges
