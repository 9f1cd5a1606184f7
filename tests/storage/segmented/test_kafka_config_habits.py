"""A Kafka user's topic config habits against the real server: a compacted log rolls at
``max.compaction.lag.ms`` (Kafka's ``LogConfig.maxSegmentMs``), a max lag below the min
lag is refused on create and on update (also when one key changes against the other's
current value), and a non-numeric value gets a readable message naming the key."""

from __future__ import annotations

from typing import Any

import pytest

from compactlog.client import Client
from compactlog.client.errors import InvalidConfig
from compactlog.errors import InvalidConfig as DomainInvalidConfig
from compactlog.storage.config import ServerSettings

HOUR_MS = 3_600_000
BASE_MS = 1_700_000_000_000


def _publish_two_hours_apart(client: Client, topic: str) -> None:
    producer = client.producer(topic)
    producer.send(b"k", b"1", event_time_ms=BASE_MS)
    producer.send(b"k", b"2", event_time_ms=BASE_MS + 2 * HOUR_MS)


@pytest.mark.parametrize("policy", ["compact", "compact,delete"])
def test_a_compacted_log_rolls_at_max_compaction_lag(
    shared_server: Any, unique_topic: str, policy: str
) -> None:
    config = {"cleanup.policy": policy, "max.compaction.lag.ms": str(HOUR_MS)}
    if policy == "compact,delete":
        config["retention.ms"] = "-1"  # the old record must not go by time
    with Client(shared_server.address) as client:
        client.create_topic(unique_topic, kind="segmented", config=config)
        _publish_two_hours_apart(client, unique_topic)
        # the record two hours younger rolled the segment: the first can now be cleaned
        assert client.get_topic(unique_topic).stats.segments == 2


def test_a_delete_only_log_keeps_rolling_at_segment_ms(
    shared_server: Any, unique_topic: str
) -> None:
    config = {
        "cleanup.policy": "delete",
        "max.compaction.lag.ms": str(HOUR_MS),
        "retention.ms": "-1",
    }
    with Client(shared_server.address) as client:
        client.create_topic(unique_topic, kind="segmented", config=config)
        _publish_two_hours_apart(client, unique_topic)
        assert client.get_topic(unique_topic).stats.segments == 1  # 2 h < segment.ms (7 days)


def test_max_lag_below_min_lag_is_refused_on_create(shared_server: Any, unique_topic: str) -> None:
    with Client(shared_server.address) as client:
        with pytest.raises(InvalidConfig) as err:
            client.create_topic(
                unique_topic,
                kind="segmented",
                config={"min.compaction.lag.ms": "7200000", "max.compaction.lag.ms": "3600000"},
            )
        assert "max.compaction.lag.ms (3600000)" in str(err.value)
        assert "min.compaction.lag.ms (7200000)" in str(err.value)
        assert unique_topic not in [t.name for t in client.list_topics()]
        # equal lags are legal, as in Kafka
        client.create_topic(
            unique_topic,
            kind="segmented",
            config={"min.compaction.lag.ms": "5000", "max.compaction.lag.ms": "5000"},
        )


def test_one_lag_changed_against_the_others_current_value(
    shared_server: Any, unique_topic: str
) -> None:
    with Client(shared_server.address) as client:
        client.create_topic(
            unique_topic, kind="segmented", config={"min.compaction.lag.ms": "60000"}
        )
        with pytest.raises(InvalidConfig) as err:
            client.update_topic_config(unique_topic, set={"max.compaction.lag.ms": "1000"})
        assert "min.compaction.lag.ms (60000)" in str(err.value)
        client.update_topic_config(unique_topic, set={"max.compaction.lag.ms": "120000"})
        with pytest.raises(InvalidConfig):
            client.update_topic_config(unique_topic, set={"min.compaction.lag.ms": "120001"})
        config = client.get_topic(unique_topic).config  # nothing of the refused changes
        assert config["min.compaction.lag.ms"] == "60000"
        assert config["max.compaction.lag.ms"] == "120000"


@pytest.mark.parametrize(
    ("key", "value", "expects"),
    [
        ("max.compaction.lag.ms", "one hour", "expected a whole number in [1, "),
        ("segment.bytes", "1e9", "expected a whole number in [14, 2147483647]"),
        ("min.cleanable.dirty.ratio", "half", "expected a number in [0.0, 1.0]"),
    ],
)
def test_a_non_numeric_value_names_the_key_and_what_it_expects(
    shared_server: Any, unique_topic: str, key: str, value: str, expects: str
) -> None:
    with Client(shared_server.address) as client, pytest.raises(InvalidConfig) as err:
        client.create_topic(unique_topic, kind="segmented", config={key: value})
    message = str(err.value)
    assert key in message and expects in message
    assert "int()" not in message and "could not convert" not in message


def test_server_file_defaults_are_checked_against_each_other() -> None:
    with pytest.raises(DomainInvalidConfig):
        ServerSettings.from_mapping({"min.compaction.lag.ms": 10, "max.compaction.lag.ms": 5})
