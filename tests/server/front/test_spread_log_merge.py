"""The front's merges of the slots' answers to Log calls on a spread partitioned topic,
over hand-built responses (``server/front/spread/log_merge.py``, ``front.spread.log``)."""

from __future__ import annotations

import asyncio

import pytest

from compactlog.partitioner import partition_name
from compactlog.server.front.partitions import PartitionedIndex
from compactlog.server.front.router import Owners
from compactlog.server.front.spread import log_merge as merge
from compactlog.server.front.spread.log import READ, SpreadLog, _first_answers
from compactlog.storage.partitioned_topics import PartitionedTopic
from compactlog.storage.slots import Placement, slot_of
from compactlog.storage.types import TopicKind
from compactlog.v1 import compactlog_pb2 as pb


def message(partition: int, entry: int, publish: int = 0, key: bytes = b"k") -> pb.Message:
    return pb.Message(
        id=pb.MessageId(ledger_id=1, entry_id=entry, partition=partition),
        key=key,
        value=b"v" * entry,
        publish_time_ms=publish,
    )


def read_response(*messages: pb.Message) -> bytes:
    return pb.ReadResponse(messages=messages).SerializeToString()


def test_count_and_cut_walk_the_wire_bytes() -> None:
    data = read_response(*(message(i % 3, i) for i in range(5)))
    assert sum(1 for _ in merge.message_spans(data)) == 5
    assert list(merge.message_spans(b"")) == []
    head, count = merge.cut(data, 3)
    assert count == 3
    assert [m.id.entry_id for m in pb.ReadResponse.FromString(head).messages] == [0, 1, 2]
    assert merge.cut(data, 9) == (data, 5)
    # Concatenated responses are one response (what Consume's merge relies on).
    both = read_response(message(0, 1)) + read_response(message(1, 2))
    assert [m.id.partition for m in pb.ConsumeResponse.FromString(both).messages] == [0, 1]


def test_last_ids_sorted_by_partition_and_the_greatest_id() -> None:
    a = pb.GetLastMessageIdResponse(
        id=pb.MessageId(ledger_id=3, entry_id=4, partition=2),
        partitions=[pb.MessageId(ledger_id=3, entry_id=4, partition=2)],
    )
    b = pb.GetLastMessageIdResponse(
        id=pb.MessageId(ledger_id=5, entry_id=1, partition=1),
        partitions=[
            pb.MessageId(ledger_id=5, entry_id=1, partition=1),
            pb.MessageId(ledger_id=2, entry_id=9, partition=0),
        ],
    )
    empty = pb.GetLastMessageIdResponse()
    merged = pb.GetLastMessageIdResponse.FromString(
        merge.last_ids([x.SerializeToString() for x in (a, empty, b)])
    )
    assert [p.partition for p in merged.partitions] == [0, 1, 2]
    assert (merged.id.ledger_id, merged.id.entry_id, merged.id.partition) == (5, 1, 1)
    none = pb.GetLastMessageIdResponse.FromString(merge.last_ids([b"", b""]))
    assert not none.HasField("id") and not none.partitions


def history(*messages: pb.Message, truncated: bool = False) -> bytes:
    return pb.GetKeyHistoryResponse(messages=messages, truncated=truncated).SerializeToString()


def test_key_history_merged_by_publish_time_with_its_limit() -> None:
    one = history(message(0, 1, publish=10), message(0, 2, publish=30))
    two = history(message(1, 3, publish=20), message(1, 4, publish=40))
    merged = pb.GetKeyHistoryResponse.FromString(merge.key_history([one, two], 0))
    assert [m.publish_time_ms for m in merged.messages] == [10, 20, 30, 40]
    assert not merged.truncated
    cut = pb.GetKeyHistoryResponse.FromString(merge.key_history([one, two], 3))
    assert [m.publish_time_ms for m in cut.messages] == [10, 20, 30]
    assert cut.truncated
    flagged = pb.GetKeyHistoryResponse.FromString(
        merge.key_history([history(truncated=True), two], 0)
    )
    assert flagged.truncated and len(flagged.messages) == 2


def spread_log() -> SpreadLog:
    index = PartitionedIndex(8, Placement.PARTITION)
    index.put(PartitionedTopic("orders", 4, TopicKind.LEDGER))
    return SpreadLog(Owners(8, None, Placement.PARTITION, "secret"), index)


def test_the_calls_answered_for_a_spread_name_only() -> None:
    log = spread_log()
    read = pb.ReadRequest(topic="orders").SerializeToString()
    assert log.spread(READ, read) == ("orders", 4)
    other = pb.ReadRequest(topic="plain").SerializeToString()
    assert log.spread(READ, other) is None
    publish = pb.PublishRequest(topic="orders").SerializeToString()
    assert log.spread("/compactlog.v1.Log/Publish", publish) is None
    ack = "/compactlog.v1.Log/Acknowledge"
    assert log.spread(ack, pb.AcknowledgeRequest(topic="orders").SerializeToString())
    for i in range(4):
        assert log.slot_of_partition(("orders", 4), i) == slot_of(
            partition_name("orders", i), 8, Placement.PARTITION
        )
    assert log.slot_of_partition(("orders", 4), 9) == slot_of("orders", 8)


def test_first_answers_takes_what_is_in_hand_once_one_has_messages() -> None:
    async def scenario() -> tuple[bytes, bytes, bool]:
        loop = asyncio.get_running_loop()
        empty, full, waiting = (loop.create_future() for _ in range(3))
        empty.set_result(b"")
        full.set_result(b"A")
        got = await _first_answers([empty, waiting, full])
        waiting.cancel()
        nothing = [loop.create_future() for _ in range(2)]
        for future in nothing:
            future.set_result(b"")
        return got, await _first_answers(nothing), waiting.cancelled()

    assert asyncio.run(scenario()) == (b"A", b"", True)


def test_first_answers_raises_an_error_before_any_messages() -> None:
    async def scenario() -> bytes:
        loop = asyncio.get_running_loop()
        failed = loop.create_future()
        failed.set_exception(RuntimeError("slot down"))
        waiting = loop.create_future()
        try:
            return await _first_answers([failed, waiting])
        finally:
            waiting.cancel()

    with pytest.raises(RuntimeError, match="slot down"):
        asyncio.run(scenario())
