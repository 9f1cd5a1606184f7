"""A store slot under partition placement, served by a real shard process.

``orders`` has its home in slot 6 of 8, so with 3 partitions slot 6 holds partition 0,
slot 7 partition 1 and slot 0 partition 2. One shard process serves slots 6 and 7 (the
front is not started: the test plays it, sending the front's mark itself). Each slot
answers calls on ``orders`` for its own partitions only, with their true indices, and
only when they carry the mark; calls naming a partition go to its slot as any topic.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from compactlog.errors import TopicExists
from compactlog.partitioner import partition_for_key
from compactlog.server.admin.partitioned_topics import PartitionedNamespace
from compactlog.server.broker import Broker
from compactlog.server.front.secret import FRONT_KEY, SECRET_ENV
from compactlog.storage.config import ServerSettings
from compactlog.storage.slots import Placement, choose_layout, slot_of
from compactlog.storage.types import TopicKind
from compactlog.v1 import compactlog_pb2 as pb
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc

SECRET = "0123456789abcdef0123456789abcdef"
MARK = ((FRONT_KEY, SECRET),)
NAME = "orders"


def key_of(partition: int) -> bytes:
    """A key Kafka's partitioner sends to ``partition`` of 3."""
    return next(b"k%d" % i for i in range(1000) if partition_for_key(b"k%d" % i, 3) == partition)


@dataclass
class Slot:
    log: pb_grpc.LogStub
    admin: pb_grpc.TopicAdminStub


@dataclass
class Shard:
    proc: subprocess.Popen[bytes]
    slots: dict[int, Slot]


@pytest.fixture(scope="module")
def shard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Shard]:
    data_dir = tmp_path_factory.mktemp("spread")
    choose_layout(data_dir, 2, Placement.PARTITION)
    command = [
        sys.executable,
        "-m",
        "compactlog.server.shards.process",
        "--data-dir",
        str(data_dir),
        "--slots",
        "6,7",
        "--slot-count",
        "8",
        "--parent-pid",
        str(os.getpid()),
        "--placement",
        "partition",
    ]
    env = {**os.environ, SECRET_ENV: SECRET, "COMPACTLOG_LOG_LEVEL": "WARNING"}
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, env=env)
    assert proc.stdout is not None
    ready = json.loads(proc.stdout.readline())
    channels = {int(s): grpc.insecure_channel(a) for s, a in ready["slots"].items()}
    slots = {s: Slot(pb_grpc.LogStub(c), pb_grpc.TopicAdminStub(c)) for s, c in channels.items()}
    try:
        yield Shard(proc, slots)
    finally:
        for channel in channels.values():
            channel.close()
        proc.terminate()
        proc.wait(30)


def refused(call: Callable[..., Any], request: Any, **kwargs: Any) -> tuple[str, str]:
    """The reason (ErrorInfo) and details a call fails with."""
    with pytest.raises(grpc.RpcError) as caught:
        result = call(request, timeout=30, **kwargs)
        if hasattr(result, "__iter__"):
            list(result)
    status = rpc_status.from_call(caught.value)
    assert status is not None
    info = error_details_pb2.ErrorInfo()
    assert status.details[0].Unpack(info)
    return info.reason, caught.value.details() or ""


def read(slot: Slot, **start: Any) -> list[pb.Message]:
    request = pb.ReadRequest(topic=NAME, **start)
    responses = slot.log.Read(request, timeout=30, metadata=MARK)
    return [m for r in responses for m in r.messages]


@pytest.fixture(scope="module")
def orders(shard: Shard) -> Shard:
    """``orders`` created through both slots (as the front does), one message each."""
    assert slot_of(NAME, 8) == 6
    for slot in shard.slots.values():
        create = pb.CreateTopicRequest(name=NAME, kind=pb.LEDGER, partitions=3)
        info = slot.admin.CreateTopic(create, timeout=30, metadata=MARK)
        assert info.partitions == 3
    for index, slot in ((0, 6), (1, 7)):
        record = pb.Record(key=key_of(index), value=b"v%d" % index)
        publish = pb.PublishRequest(topic=f"{NAME}-partition-{index}", records=[record])
        ids = shard.slots[slot].log.Publish(publish, timeout=30).ids  # no mark: a partition
        assert [i.partition for i in ids] == [index]
    return shard


def test_each_slot_holds_its_partitions_and_the_full_count(orders: Shard) -> None:
    six, seven = orders.slots[6], orders.slots[7]
    info = six.admin.GetTopic(pb.GetTopicRequest(name=NAME), timeout=30, metadata=MARK)
    assert (info.partitions, info.stats.entries) == (3, 1)
    pmap = seven.admin.GetPartitionMap(
        pb.GetPartitionMapRequest(topic=NAME), timeout=30, metadata=MARK
    )
    assert [(p.partition, p.topic) for p in pmap.partitions] == [(1, f"{NAME}-partition-1")]
    listed = six.admin.ListTopics(pb.ListTopicsRequest(), timeout=30)
    assert sorted(t.name for t in listed.topics) == [NAME, f"{NAME}-partition-0"]
    status = seven.admin.GetCompactionStatus(
        pb.GetCompactionStatusRequest(topic=NAME), timeout=30, metadata=MARK
    )
    assert len(status.partitions) == 1


def test_reads_and_last_ids_cover_local_partitions_with_true_indices(orders: Shard) -> None:
    six, seven = orders.slots[6], orders.slots[7]
    assert [(m.id.partition, m.value) for m in read(seven)] == [(1, b"v1")]
    assert [m.value for m in read(six, position=pb.EARLIEST)] == [b"v0"]
    last = seven.log.GetLastMessageId(
        pb.GetLastMessageIdRequest(topic=NAME), timeout=30, metadata=MARK
    )
    assert [p.partition for p in last.partitions] == [1] and last.id.partition == 1
    # An id of a partition held elsewhere: every local one from its earliest message.
    elsewhere = pb.MessageId(ledger_id=999, entry_id=5, partition=2)
    assert [m.value for m in read(seven, message_id=elsewhere)] == [b"v1"]
    with pytest.raises(grpc.RpcError) as out_of_range:
        read(seven, message_id=pb.MessageId(partition=3))
    assert out_of_range.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_compaction_and_key_history_of_the_name_cover_local_partitions(orders: Shard) -> None:
    seven = orders.slots[7]
    compact = pb.CompactRequest(topic=NAME, wait=True)
    status = seven.admin.Compact(compact, timeout=60, metadata=MARK)
    assert status.state == pb.CompactionStatus.SUCCESS and len(status.partitions) == 1
    history = pb.GetKeyHistoryRequest(topic=NAME, key=key_of(1))
    found = seven.log.GetKeyHistory(history, timeout=30, metadata=MARK).messages
    assert found and {m.id.partition for m in found} == {1}
    absent = pb.GetKeyHistoryRequest(topic=NAME, key=key_of(0))  # partition 0: slot 6's
    assert not seven.log.GetKeyHistory(absent, timeout=30, metadata=MARK).messages


def test_a_publish_to_the_name_is_served_only_when_every_record_is_local(orders: Shard) -> None:
    seven = orders.slots[7]
    local = pb.PublishRequest(topic=NAME, records=[pb.Record(key=key_of(1), value=b"more")])
    ids = seven.log.Publish(local, timeout=30, metadata=MARK).ids
    assert [i.partition for i in ids] == [1]
    streamed = seven.log.PublishStream(iter([local, local]), timeout=30, metadata=MARK)
    assert [[i.partition for i in r.ids] for r in streamed] == [[1], [1]]
    with pytest.raises(grpc.RpcError) as unmarked:  # a stream's requests are admitted too
        list(seven.log.PublishStream(iter([local]), timeout=30))
    assert unmarked.value.code() == grpc.StatusCode.UNAVAILABLE
    spanning = pb.PublishRequest(
        topic=NAME, records=[pb.Record(key=key_of(p), value=b"x") for p in (1, 2)]
    )
    reason, details = refused(seven.log.Publish, spanning, metadata=MARK)
    assert reason == "NOT_OWNER" and "partitions held by other store slots (2)" in details


def test_acks_naming_a_partition_held_elsewhere_are_not_owner(orders: Shard) -> None:
    six = orders.slots[6]
    consume = pb.ConsumeRequest(topic=NAME, subscription="s", max_messages=10)
    got = six.log.Consume(consume, timeout=30, metadata=MARK)
    assert [m.id.partition for m in got.messages] == [0]
    ack = pb.AcknowledgeRequest(topic=NAME, subscription="s", id=got.messages[0].id)
    six.log.Acknowledge(ack, timeout=30, metadata=MARK)
    foreign = pb.MessageId(ledger_id=1, entry_id=0, partition=1)
    ack = pb.AcknowledgeRequest(topic=NAME, subscription="s", id=foreign)
    assert refused(six.log.Acknowledge, ack, metadata=MARK)[0] == "NOT_OWNER"
    nack = pb.NegativeAcknowledgeRequest(topic=NAME, subscription="s", ids=[foreign])
    assert refused(six.log.NegativeAcknowledge, nack, metadata=MARK)[0] == "NOT_OWNER"


def test_calls_on_a_spread_topic_without_the_mark_are_refused(orders: Shard) -> None:
    six = orders.slots[6]
    reason, details = refused(six.admin.GetTopic, pb.GetTopicRequest(name=NAME))
    assert reason == "NOT_OWNER"
    assert "orders's partitions span several shards: call the server's main address" in details
    wrong = (FRONT_KEY, "f" * 32)
    assert refused(six.log.Read, pb.ReadRequest(topic=NAME), metadata=(wrong,))[0] == "NOT_OWNER"
    # Creating a partitioned topic needs the front too; an ordinary one does not.
    home_six = next(f"t{i}" for i in range(100) if slot_of(f"t{i}", 8) == 6)
    create = pb.CreateTopicRequest(name=home_six, kind=pb.LEDGER, partitions=2)
    assert refused(six.admin.CreateTopic, create)[0] == "NOT_OWNER"
    six.admin.CreateTopic(pb.CreateTopicRequest(name=home_six, kind=pb.LEDGER), timeout=30)
    # A topic of another slot is refused as ever, mark or not naming the wrong slot.
    other = next(f"t{i}" for i in range(100) if slot_of(f"t{i}", 8) == 3)
    assert refused(six.admin.GetTopic, pb.GetTopicRequest(name=other))[0] == "NOT_OWNER"


def test_delete_through_one_slot_leaves_the_other_slots_part(shard: Shard) -> None:
    name = next(f"d{i}" for i in range(100) if slot_of(f"d{i}", 8) == 6)  # partitions: 6, 7
    six, seven = shard.slots[6], shard.slots[7]
    for slot in (six, seven):
        create = pb.CreateTopicRequest(name=name, kind=pb.SEGMENTED, partitions=2)
        slot.admin.CreateTopic(create, timeout=30, metadata=MARK)
    grown = seven.admin.AddPartitions(
        pb.AddPartitionsRequest(name=name, partitions=3), timeout=30, metadata=MARK
    )  # partition 2 lives in slot 0: slot 7 records the count, creates nothing
    assert grown.partitions == 3
    six.admin.DeleteTopic(pb.DeleteTopicRequest(name=name), timeout=30, metadata=MARK)
    reason, _ = refused(six.admin.GetTopic, pb.GetTopicRequest(name=name), metadata=MARK)
    assert reason == "TOPIC_NOT_FOUND"
    gone = pb.GetTopicRequest(name=f"{name}-partition-0")
    assert refused(six.admin.GetTopic, gone)[0] == "TOPIC_NOT_FOUND"
    kept = seven.admin.GetTopic(pb.GetTopicRequest(name=name), timeout=30, metadata=MARK)
    assert kept.partitions == 3
    assert seven.admin.GetTopic(pb.GetTopicRequest(name=f"{name}-partition-1"), timeout=30)


def test_a_slots_namespace_configures_its_own_partitions(tmp_path: Path) -> None:
    """In-process: slot 7 of 8 holds partition 1 (and, once grown past 8, partition 9)
    of ``orders``; the config it reports and gives new partitions is its lowest one's."""
    broker = Broker(tmp_path, ServerSettings(topic_defaults={}), holds=slot_holds(7))
    try:
        space = PartitionedNamespace(broker)
        space.create(NAME, TopicKind.SEGMENTED, {"retention.ms": "1000"}, 3)
        assert broker.topic_names() == [f"{NAME}-partition-1"]
        space.update_config(NAME, {"retention.ms": "2000"}, [])
        grown = space.add_partitions(NAME, 10)
        assert broker.topic_names() == [f"{NAME}-partition-1", f"{NAME}-partition-9"]
        assert (grown.partitions, grown.config["retention.ms"]) == (10, "2000")
        assert broker.overrides(f"{NAME}-partition-9") == {"retention.ms": "2000"}
        assert space.local(NAME) == [(1, f"{NAME}-partition-1"), (9, f"{NAME}-partition-9")]
        elsewhere = f"x-partition-{(next_here(7) + 1) % 8}"  # a name of another slot
        broker.create_topic(elsewhere, TopicKind.LEDGER, {})
        with pytest.raises(TopicExists):  # every name is checked, not only the local ones
            space.create("x", TopicKind.LEDGER, {}, 8)
        assert space.get("x") is None
        space.delete(NAME)
        assert broker.topic_names() == [elsewhere]
    finally:
        broker.close()


def slot_holds(slot: int) -> Callable[[str], bool]:
    return lambda name: slot_of(name, 8, Placement.PARTITION) == slot


def next_here(slot: int) -> int:
    """The partition of ``x`` that lives in ``slot``."""
    return (slot - slot_of("x", 8)) % 8


def test_subscription_calls_on_the_name_act_on_local_partitions(orders: Shard) -> None:
    seven = orders.slots[7]  # partition 1 alone
    consume = pb.ConsumeRequest(topic=NAME, subscription="admin", max_messages=100)
    got = seven.log.Consume(consume, timeout=30, metadata=MARK).messages
    assert got and {m.id.partition for m in got} == {1}
    listing = pb.ListSubscriptionsRequest(topic=NAME)
    listed = {
        s.name: s
        for s in seven.admin.ListSubscriptions(listing, timeout=30, metadata=MARK).subscriptions
    }
    assert listed["admin"].backlog == len(got)
    own = pb.ResetCursorRequest(topic=NAME, subscription="admin", message_id=got[-1].id)
    assert seven.admin.ResetCursor(own, timeout=30, metadata=MARK).backlog == 1  # inclusive
    foreign = pb.ResetCursorRequest(
        topic=NAME, subscription="admin", message_id=pb.MessageId(ledger_id=1, partition=2)
    )
    assert refused(seven.admin.ResetCursor, foreign, metadata=MARK)[0] == "NOT_OWNER"
    assert refused(seven.admin.ListSubscriptions, listing)[0] == "NOT_OWNER"  # no mark
    delete = pb.DeleteSubscriptionRequest(topic=NAME, subscription="admin")
    seven.admin.DeleteSubscription(delete, timeout=30, metadata=MARK)
    assert refused(seven.admin.DeleteSubscription, delete, metadata=MARK)[0] == (
        "SUBSCRIPTION_NOT_FOUND"
    )
