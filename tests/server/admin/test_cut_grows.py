"""An AddPartitions cut short (kill -9 after some partitions were made, before the count
was recorded) is finished, never left half-made: the change is kept first and the next
start finishes it, with whatever was written to its partitions; a topic of its own under a
new partition's name is refused, never taken in. A real Broker on real files; the e2e test
kills a real server in the middle of one."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from pathlib import Path

import grpc
import pytest

from compactlog.errors import InvalidConfig, TopicExists
from compactlog.partitioner import partition_name
from compactlog.server.admin.partitioned_topics import PartitionedNamespace
from compactlog.server.broker import Broker
from compactlog.storage.config import ServerSettings
from compactlog.storage.partitioned_topics import Op, PendingChange
from compactlog.storage.types import TopicKind
from compactlog.v1 import compactlog_pb2 as pb

from ...conftest import ServerProcess, Stubs

SETTINGS = ServerSettings(topic_defaults={})


@pytest.mark.parametrize("kind", [TopicKind.LEDGER, TopicKind.SEGMENTED])
def test_a_topic_under_a_new_partitions_name_is_refused_not_taken_in(
    tmp_path: Path, kind: TopicKind
) -> None:
    """A topic of its own named like a new partition (made before ``p`` was partitioned,
    or by an older version's grow that left no record): the grow refuses it, naming it,
    and nothing changes; it is never taken in with its data and subscriptions."""
    broker = Broker(tmp_path, SETTINGS)
    space = PartitionedNamespace(broker)
    broker.create_topic(partition_name("p", 3), kind, {})
    space.create("p", kind, {}, 2)
    broker.log(partition_name("p", 3)).append_request(
        pb.PublishRequest(
            topic=partition_name("p", 3), records=[pb.Record(value=b"x")]
        ).SerializeToString()
    )
    with pytest.raises(TopicExists, match="p-partition-3' already exists as a topic of its own"):
        space.add_partitions("p", 6)
    assert space.require("p").partitions == 2 and broker.partitioned.pending() == []
    assert [n for n in broker.topic_names() if n.startswith("p-")] == [
        partition_name("p", i) for i in (0, 1, 3)
    ]
    assert broker.describe(partition_name("p", 3)).entries == 1
    space.add_partitions("p", 3)  # below it: grown
    assert space.require("p").partitions == 3
    broker.close()


@pytest.mark.parametrize("kind", [TopicKind.LEDGER, TopicKind.SEGMENTED])
def test_a_pending_change_is_rolled_forward_at_start(tmp_path: Path, kind: TopicKind) -> None:
    """What a kill -9 inside each call leaves (the change kept, some partitions made or
    deleted) is finished whole by the next start, to the count the call asked for."""
    broker = Broker(tmp_path, SETTINGS)
    space = PartitionedNamespace(broker)
    space.create("p", kind, {"retention.ms": "60000"}, 2)
    broker.partitioned.begin(PendingChange("p", Op.GROW, 6, kind, {"retention.ms": "60000"}))
    broker.create_topic(partition_name("p", 2), kind, {"retention.ms": "60000"})
    broker.partitioned.begin(PendingChange("c", Op.CREATE, 3, kind, {}))
    broker.create_topic(partition_name("c", 0), kind, {})
    space.create("d", kind, {}, 4)
    broker.partitioned.begin(PendingChange("d", Op.DELETE, 4, kind))
    broker.delete_topic(partition_name("d", 0))
    broker.close()

    broker = Broker(tmp_path, SETTINGS)
    space = PartitionedNamespace(broker)
    assert [c.name for c in space.finish_pending()] == ["c", "d", "p"]
    assert space.require("p").partitions == 6
    assert space.require("c").partitions == 3
    assert space.get("d") is None
    assert broker.partitioned.pending() == []
    names = [n for n in broker.topic_names() if "-partition-" in n]
    assert names == sorted(
        [partition_name("c", i) for i in range(3)] + [partition_name("p", i) for i in range(6)]
    )
    assert broker.overrides(partition_name("p", 5)) == {"retention.ms": "60000"}
    broker.close()


def test_a_bad_config_starts_nothing(tmp_path: Path) -> None:
    broker = Broker(tmp_path, SETTINGS)
    space = PartitionedNamespace(broker)
    with pytest.raises(InvalidConfig):
        space.create("p", TopicKind.SEGMENTED, {"no.such.key": "1"}, 3)
    assert broker.partitioned.pending() == [] and broker.topic_names() == []
    broker.close()


def test_a_topic_of_the_other_kind_is_not_taken_in(tmp_path: Path) -> None:
    broker = Broker(tmp_path, SETTINGS)
    space = PartitionedNamespace(broker)
    space.create("p", TopicKind.LEDGER, {}, 2)
    broker.create_topic(partition_name("p", 2), TopicKind.SEGMENTED, {})
    with pytest.raises(TopicExists):
        space.add_partitions("p", 3)
    broker.close()


@pytest.mark.slow
def test_kill_9_in_add_partitions_never_leaves_a_half_made_set(
    server_factory: Callable[..., ServerProcess], connect: Callable[[str], Stubs]
) -> None:
    srv = server_factory()
    api = connect(srv.address)
    api.admin.CreateTopic(
        pb.CreateTopicRequest(name="q", kind=pb.SEGMENTED, partitions=2), timeout=30
    )
    for delay in (0.15, 0.3):
        grow = threading.Thread(target=_grow_to_40, args=(api,), daemon=True)
        grow.start()
        time.sleep(delay)  # somewhere inside the grow, as the reproduction did
        srv.kill()
        grow.join(30)
        srv.start()
        api = connect(srv.address)
        info = api.admin.GetTopic(pb.GetTopicRequest(name="q"), timeout=30)
        names = {t.name for t in api.admin.ListTopics(pb.ListTopicsRequest(), timeout=30).topics}
        made = {n for n in names if n.startswith("q-partition-")}
        assert made == {f"q-partition-{i}" for i in range(info.partitions)}, (info.partitions, made)
        grown = api.admin.AddPartitions(
            pb.AddPartitionsRequest(name="q", partitions=40), timeout=60
        )
        assert grown.partitions == 40
        api.admin.DeleteTopic(pb.DeleteTopicRequest(name="q"), timeout=60)
        api.admin.CreateTopic(
            pb.CreateTopicRequest(name="q", kind=pb.SEGMENTED, partitions=2), timeout=30
        )


def _grow_to_40(api: Stubs) -> None:
    with contextlib.suppress(grpc.RpcError):  # the server is killed under it
        api.admin.AddPartitions(pb.AddPartitionsRequest(name="q", partitions=40), timeout=30)


def test_a_pending_change_moves_into_its_slot_and_is_finished_there(tmp_path: Path) -> None:
    """``compactlog migrate --slots`` over a data dir a crash left with a grow pending:
    the change goes into the topic's slot with it and that slot's start finishes it."""
    from compactlog.storage.slot_migrate import migrate_to_slots
    from compactlog.storage.slots import SLOT_COUNT, slot_dir, slot_of

    broker = Broker(tmp_path, SETTINGS)
    PartitionedNamespace(broker).create("p", TopicKind.SEGMENTED, {}, 2)
    broker.partitioned.begin(PendingChange("p", Op.GROW, 5, TopicKind.SEGMENTED))
    broker.create_topic(partition_name("p", 2), TopicKind.SEGMENTED, {})
    broker.close()
    migrate_to_slots(tmp_path, log=lambda _line: None)
    slot = Broker(slot_dir(tmp_path, slot_of("p", SLOT_COUNT)), SETTINGS)
    assert [c.name for c in PartitionedNamespace(slot).finish_pending()] == ["p"]
    assert PartitionedNamespace(slot).require("p").partitions == 5
    assert [n for n in slot.topic_names() if n.startswith("p-")] == [
        partition_name("p", i) for i in range(5)
    ]
    slot.close()
