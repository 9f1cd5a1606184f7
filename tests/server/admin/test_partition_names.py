"""A topic of its own named like a partition (``NAME-partition-i``) is refused while
``NAME`` is partitioned, and the partitions of a delete refused half-way take no publish
or reader: a real Broker on real files (the e2e tests meet both through a real server)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from compactlog.errors import InvalidTopicName, TopicExists, TopicNotFound
from compactlog.partitioner import partition_name
from compactlog.server.admin.partitioned_topics import PartitionedNamespace
from compactlog.server.broker import Broker
from compactlog.storage.config import ServerSettings
from compactlog.storage.partitioned_topics import Op, PendingChange
from compactlog.storage.types import TopicKind

SETTINGS = ServerSettings(topic_defaults={})
KIND = TopicKind.SEGMENTED


@pytest.fixture
def space(tmp_path: Path) -> Iterator[PartitionedNamespace]:
    broker = Broker(tmp_path, SETTINGS)
    yield PartitionedNamespace(broker)
    broker.close()


@pytest.mark.parametrize("index", [0, 1, 2, 7, 999])
def test_a_partitions_name_is_refused_while_its_topic_is_partitioned(
    space: PartitionedNamespace, index: int
) -> None:
    space.create("p", KIND, {}, 2)
    name = partition_name("p", index)
    with pytest.raises(InvalidTopicName, match="partition's name of the partitioned topic 'p'"):
        space.create_plain(name, KIND, {})
    with pytest.raises(InvalidTopicName) as validated:
        space.check_plain(name, KIND, {})
    assert validated.value.metadata == {"topic": name, "partitioned_topic": "p"}
    assert space.require("p").partitions == 2
    assert space.broker.has_name(partition_name("p", 2)) is False


def test_names_like_a_partition_of_no_partitioned_topic_are_free(
    space: PartitionedNamespace,
) -> None:
    space.create_plain("q-partition-3", KIND, {})  # no q: a name like any other
    space.create_plain("p-partition-x", KIND, {})  # not a partition's name
    with pytest.raises(TopicExists):
        space.create("q", KIND, {}, 4)  # its partition 3 is taken
    space.create("r", KIND, {}, 2)
    space.delete("r")
    space.create_plain("r-partition-5", KIND, {})  # r is gone: free again


def test_the_partitions_of_a_delete_refused_half_way_take_no_publish_or_reader(
    space: PartitionedNamespace,
) -> None:
    broker = space.broker
    space.create("d", KIND, {}, 4)
    broker.partitioned.begin(PendingChange("d", Op.DELETE, 4, KIND))  # as a refusal leaves it
    broker.delete_topic(partition_name("d", 0))
    for i in (1, 3):
        with pytest.raises(TopicNotFound, match="is being deleted: a DeleteTopic of 'd'") as no:
            broker.log(partition_name("d", i))
        assert no.value.metadata == {"topic": partition_name("d", i), "deleting": "d"}
    with pytest.raises(InvalidTopicName):
        space.create_plain(partition_name("d", 9), KIND, {})  # still d's until it is done
    space.delete("d")  # the next DeleteTopic finishes it
    assert broker.topic_names() == [] and broker.partitioned.pending() == []
    space.create_plain(partition_name("d", 1), KIND, {})
    assert broker.log(partition_name("d", 1)).partition == 0


@pytest.mark.parametrize("name", ["x-partition-0", "x-partition-3", "a-partition-1-partition-2"])
def test_a_partitioned_topic_named_like_a_partition_is_refused(
    space: PartitionedNamespace, name: str
) -> None:
    """Pulsar refuses it: ``X-partition-N`` would read as partition N of ``X``, and its
    own partitions would be ``X-partition-N-partition-i``. Validate-only too."""
    for call in (space.create, space.check):
        with pytest.raises(InvalidTopicName, match="is a partition's name") as refused:
            call(name, KIND, {}, 2)
        assert refused.value.metadata == {"topic": name}
    assert space.broker.topic_names() == [] and space.broker.partitioned.names() == []
    space.create_plain(name, KIND, {})  # a topic of its own may take it
    space.check("x-partition-y", KIND, {}, 2)  # not a partition's name
