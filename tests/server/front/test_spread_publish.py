"""The front's split of a publish to a spread partitioned topic, and its reply (no server).

The end-to-end behaviour over real shards is in tests/e2e/test_spread_publish.py; here
the pieces it is built of: the parts are PublishRequests of ``NAME-partition-i`` holding
exactly the records Kafka's partitioner puts there, the reply puts the slots' ids back in
request order, and the size check refuses what a single store refuses, naming the record.
"""

from __future__ import annotations

import pytest

from compactlog.errors import RecordTooLarge
from compactlog.partitioner import partition_for_key
from compactlog.server.front.spread.publish import (
    Limits,
    Split,
    assemble,
    check_sizes,
    reply_fields,
    split,
)
from compactlog.server.log.partitioned_publish import RoundRobin
from compactlog.storage import batch
from compactlog.storage.partitioned_topics import PartitionedTopic
from compactlog.storage.slots import SLOT_COUNT, Placement, slot_of
from compactlog.storage.types import TopicKind
from compactlog.v1 import compactlog_pb2 as pb

TOPIC = PartitionedTopic("prices", 4, TopicKind.LEDGER)


def _slot(name: str) -> int:
    return slot_of(name, SLOT_COUNT, Placement.PARTITION)


def _request(records: list[pb.Record]) -> bytes:
    return pb.PublishRequest(topic=TOPIC.name, records=records).SerializeToString()


def _keyed(n: int, value: bytes = b"v") -> list[pb.Record]:
    return [pb.Record(key=b"key-%d" % i, value=value) for i in range(n)]


def test_parts_hold_each_partitions_records_for_its_slot() -> None:
    records = _keyed(40)
    cut = split(TOPIC, _request(records), RoundRobin(), _slot)
    seen: list[bytes] = []
    for part in cut.parts:
        request = pb.PublishRequest.FromString(part.request)
        assert request.topic == f"prices-partition-{part.partition}"
        assert part.slot == _slot(request.topic)
        assert {partition_for_key(r.key, 4) for r in request.records} == {part.partition}
        seen += [r.key for r in request.records]
    assert sorted(seen) == sorted(r.key for r in records)
    assert len({p.slot for p in cut.parts}) == 4  # one topic's partitions, four slots
    # order: every record's (partition, index in its part), in request order
    flat = cut.order.tolist()
    pairs = list(zip(flat[0::2], flat[1::2], strict=True))
    assert [p for p, _k in pairs] == [partition_for_key(r.key, 4) for r in records]


def test_keyless_records_take_turns_across_calls() -> None:
    robin = RoundRobin()
    first = split(TOPIC, _request([pb.Record(value=b"a")] * 3), robin, _slot)
    second = split(TOPIC, _request([pb.Record(value=b"b")] * 3), robin, _slot)
    assert [p.partition for p in first.parts] == [0, 1, 2]
    assert [p.partition for p in second.parts] == [0, 1, 3]  # 3, then 0 and 1 again


def test_a_publish_without_records_has_no_part() -> None:
    cut = split(TOPIC, _request([]), RoundRobin(), _slot)
    assert cut.parts == [] and len(cut.order) == 0
    assert pb.PublishResponse.FromString(assemble([], cut.order, [])).ids == []


def _reply(partition: int, ledger: int, first: int, count: int, synced: bool) -> bytes:
    ids = [
        pb.MessageId(ledger_id=ledger, entry_id=first + k, partition=partition)
        for k in range(count)
    ]
    return pb.PublishResponse(ids=ids, synced=synced).SerializeToString()


def _cut_and_replies(synced: tuple[bool, ...]) -> tuple[Split, list[bytes]]:
    records = _keyed(20)
    cut = split(TOPIC, _request(records), RoundRobin(), _slot)
    replies = []
    for part, flag in zip(cut.parts, synced, strict=True):
        count = len(pb.PublishRequest.FromString(part.request).records)
        replies.append(_reply(part.partition, 10 + part.partition, 100, count, flag))
    return cut, replies


def test_reply_lists_the_slots_ids_in_request_order() -> None:
    cut, replies = _cut_and_replies((True,) * 4)
    answer = pb.PublishResponse.FromString(assemble(cut.parts, cut.order, replies))
    assert answer.synced
    flat = cut.order.tolist()
    expected = [(10 + p, 100 + k, p) for p, k in zip(flat[0::2], flat[1::2], strict=True)]
    assert [(i.ledger_id, i.entry_id, i.partition) for i in answer.ids] == expected


def test_reply_is_synced_only_when_every_part_was() -> None:
    cut, replies = _cut_and_replies((True, False, True, True))
    assert not pb.PublishResponse.FromString(assemble(cut.parts, cut.order, replies)).synced


def test_reply_fields_keep_each_id_as_sent() -> None:
    reply = _reply(2, 7, 0, 3, True)
    ids, synced = reply_fields(reply)
    assert synced and b"".join(ids) + b"\x10\x01" == reply
    assert reply_fields(b"") == ([], False)


def test_a_record_over_its_partitions_limit_is_named_in_request_order() -> None:
    records = _keyed(12)
    records[7] = pb.Record(key=records[7].key, value=b"x" * 500)
    cut = split(TOPIC, _request(records), RoundRobin(), _slot)
    big = partition_for_key(records[7].key, 4)
    limits = dict.fromkeys(range(4), 400)
    with pytest.raises(RecordTooLarge) as caught:
        check_sizes(cut, limits, 1_700_000_000_000)
    assert caught.value.metadata["record"] == "7"
    assert caught.value.metadata["topic"] == f"prices-partition-{big}"
    assert caught.value.metadata["limit"] == "400"
    assert "nothing of this batch was stored" in str(caught.value)
    limits[big] = 600  # each partition's own limit counts
    check_sizes(cut, limits, 1_700_000_000_000)


def test_the_size_check_measures_as_the_store_does() -> None:
    """A record exactly at the limit passes, one byte over does not (the store's
    measure: the message without its id, publish and event time included)."""
    cut = split(TOPIC, _request([pb.Record(key=b"k", value=b"x" * 300)]), RoundRobin(), _slot)
    (part,) = cut.parts
    now = 1_700_000_000_000
    size = batch.encode_request(part.request, 0, 0, 0, now, partition=part.partition).max_size
    check_sizes(cut, {part.partition: size}, now)
    with pytest.raises(RecordTooLarge):
        check_sizes(cut, {part.partition: size - 1}, now)


def test_limits_are_kept_briefly_and_forgotten() -> None:
    limits = Limits(ttl_s=60.0)
    assert limits.get("t") is None
    limits.put("t", 5)
    assert limits.get("t") == 5
    limits.forget()
    assert limits.get("t") is None
    stale = Limits(ttl_s=-1.0)
    stale.put("t", 5)
    assert stale.get("t") is None
