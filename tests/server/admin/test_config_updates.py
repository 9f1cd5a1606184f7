"""Concurrent config changes of one topic all stay: UpdateTopicConfig (gRPC) and Kafka's
IncrementalAlterConfigs read a topic's overrides, change them and write them back, and
two changes of different keys at once must not drop one another. A real Broker on real
files, threads released together."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from compactlog.server.admin.partitioned_topics import PartitionedNamespace
from compactlog.server.broker import Broker
from compactlog.storage.config import ServerSettings
from compactlog.storage.types import TopicKind

KEYS = {
    TopicKind.SEGMENTED: ["retention.ms", "segment.ms", "flush.ms", "file.delete.delay.ms"],
    TopicKind.LEDGER: ["retention.ms", "retention.bytes", "ledger.max.entries"],
}
ROUNDS = 8


def change_at_once(update: object, topic: str, keys: list[str]) -> None:
    """Each key set by its own thread, all released together."""
    release = threading.Barrier(len(keys))
    failures: list[BaseException] = []

    def set_one(key: str) -> None:
        release.wait()
        try:
            update(topic, {key: "1000"}, [])  # type: ignore[operator]
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=set_one, args=(k,)) for k in keys]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures


@pytest.mark.parametrize("kind", [TopicKind.SEGMENTED, TopicKind.LEDGER], ids=lambda k: k.name)
def test_concurrent_changes_of_different_keys_all_stay(tmp_path: Path, kind: TopicKind) -> None:
    broker = Broker(tmp_path, ServerSettings(topic_defaults={}))
    try:
        for round_ in range(ROUNDS):
            name = f"t{round_}"
            broker.create_topic(name, kind, {})
            change_at_once(broker.update_config, name, KEYS[kind])
            assert sorted(broker.overrides(name)) == sorted(KEYS[kind])
    finally:
        broker.close()


def test_concurrent_changes_of_a_partitioned_topic_all_stay(tmp_path: Path) -> None:
    broker = Broker(tmp_path, ServerSettings(topic_defaults={}))
    space = PartitionedNamespace(broker)
    keys = KEYS[TopicKind.SEGMENTED]
    try:
        for round_ in range(ROUNDS // 2):
            name = f"p{round_}"
            space.create(name, TopicKind.SEGMENTED, {}, 2)
            change_at_once(space.update_config, name, keys)
            for part in space.partition_names(name):
                assert sorted(broker.overrides(part)) == sorted(keys)
    finally:
        broker.close()
