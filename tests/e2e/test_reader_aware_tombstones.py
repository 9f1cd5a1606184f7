"""Reader-aware tombstone removal through a real server (compaction in worker processes):
a durable subscription reading compacted that has not passed a tombstone still gets it
from the compacted ledger, whatever ``delete.retention.ms``; once it has, the next
compaction drops it. A subscription reading raw holds nothing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from compactlog.v1 import compactlog_pb2 as pb

Api = Any
Id = tuple[int, int]


def consume(api: Api, topic: str, sub: str, n: int, compacted: bool = True) -> list[Any]:
    req = pb.ConsumeRequest(topic=topic, subscription=sub, read_compacted=compacted, max_messages=n)
    resp = api.log.Consume(req, timeout=30)
    return [
        (
            (m.id.ledger_id, m.id.entry_id),
            m.key if m.HasField("key") else None,
            m.value if m.HasField("value") else None,
        )
        for m in resp.messages
    ]


def ack(api: Api, topic: str, sub: str, msg_id: Id) -> None:
    req = pb.AcknowledgeRequest(
        topic=topic,
        subscription=sub,
        id=pb.MessageId(ledger_id=msg_id[0], entry_id=msg_id[1]),
        cumulative=True,
    )
    api.log.Acknowledge(req, timeout=30)


def test_a_slow_compacted_subscription_sees_the_tombstone_until_it_passes_it(
    shared_server: Any, ledger_api: Callable[[str], Api], unique_topic: str
) -> None:
    api = ledger_api(shared_server.address)
    api.create(unique_topic, delete_retention_ms="0")
    (a1, _b1) = api.publish(unique_topic, (b"a", b"1"), (b"b", b"1"))
    assert consume(api, unique_topic, "slow", 1) == [(a1, b"a", b"1")]
    ack(api, unique_topic, "slow", a1)
    consume(api, unique_topic, "raw", 1, compacted=False)  # holds no tombstone
    (gone, c1) = api.publish(unique_topic, (b"a", None), (b"c", b"1"))
    status = api.compact(unique_topic)
    assert status.state == pb.CompactionStatus.SUCCESS
    assert (status.last_run.kept, status.last_run.tombstones) == (3, 0)
    assert api.keys(unique_topic) == [(b"b", b"1"), (b"a", None), (b"c", b"1")]
    verified = api.admin.VerifyCompaction(pb.VerifyCompactionRequest(topic=unique_topic))
    assert verified.ok, verified.problems
    api.publish(unique_topic, (b"d", b"1"))
    api.compact(unique_topic)  # the subscription still has not passed it
    got = consume(api, unique_topic, "slow", 10)
    assert (gone, b"a", None) in got and got[0][1] == b"b"
    ack(api, unique_topic, "slow", got[-1][0])
    api.publish(unique_topic, (b"e", b"1"))
    status = api.compact(unique_topic)
    assert status.last_run.tombstones == 1
    assert [k for k, _v in api.keys(unique_topic)] == [b"b", b"c", b"d", b"e"]
    assert c1 in [i for i, _k, _v in api.read(unique_topic)]


def test_without_compacted_subscriptions_tombstones_go_at_once(
    shared_server: Any, ledger_api: Callable[[str], Api], unique_topic: str
) -> None:
    api = ledger_api(shared_server.address)
    api.create(unique_topic)
    info = api.admin.GetTopic(pb.GetTopicRequest(name=unique_topic))
    assert info.config["delete.retention.ms"] == "0"
    api.publish(unique_topic, (b"a", b"1"), (b"b", b"1"))
    consume(api, unique_topic, "raw", 1, compacted=False)
    api.publish(unique_topic, (b"a", None))
    api.compact(unique_topic)
    assert api.keys(unique_topic) == [(b"b", b"1")]
