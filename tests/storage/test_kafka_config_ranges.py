"""SEGMENTED topic config is validated as Kafka validates it (kafka-topics.sh --config and
kafka-configs.sh --alter accept and refuse the same values), LEDGER config as Pulsar's
policies; the effective config lists every key with its default (kafka-configs --describe
--all)."""

from __future__ import annotations

import pytest

from compactlog.errors import InvalidConfig
from compactlog.storage.config import (
    ServerSettings,
    effective_topic_config,
    validate_topic_overrides,
)
from compactlog.storage.types import TopicKind

SEG = TopicKind.SEGMENTED


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("segment.bytes", "14"),  # Kafka's minimum (one record batch header)
        ("min.cleanable.dirty.ratio", "0"),
        ("min.cleanable.dirty.ratio", "1"),
        ("retention.ms", "-1"),  # -1: unlimited
        ("retention.bytes", "-1"),
        ("cleanup.policy", "compact,delete"),
        ("cleanup.policy", "delete,compact"),
        ("delete.retention.ms", "0"),
        ("max.compaction.lag.ms", "1"),
    ],
)
def test_kafka_accepts(key: str, value: str) -> None:
    assert key in validate_topic_overrides(SEG, {key: value})


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("segment.bytes", "13"),
        ("min.cleanable.dirty.ratio", "1.5"),
        ("min.cleanable.dirty.ratio", "-0.1"),
        ("retention.ms", "-2"),
        ("cleanup.policy", "erase"),
        ("max.compaction.lag.ms", "0"),
        ("segment.ms", "many"),
        ("ledger.max.entries", "10"),  # a LEDGER key on a SEGMENTED topic
    ],
)
def test_kafka_refuses(key: str, value: str) -> None:
    with pytest.raises(InvalidConfig):
        validate_topic_overrides(SEG, {key: value})


def test_effective_config_has_every_key_with_defaults() -> None:
    effective = effective_topic_config(SEG, {"cleanup.policy": "compact"})
    assert effective["cleanup.policy"] == "compact"
    assert effective["segment.bytes"] == "1073741824"  # Kafka's default
    assert effective["min.cleanable.dirty.ratio"] == "0.5"
    ledger = effective_topic_config(TopicKind.LEDGER, {})
    assert ledger["ledger.max.entries"] == "50000" and ledger["retention.ms"] == "-1"


def test_a_one_entry_dedupe_buffer_is_legal() -> None:
    settings = ServerSettings.from_mapping({"log.cleaner.dedupe.buffer.size": 48})
    assert settings.log_cleaner_dedupe_buffer_size == 48
