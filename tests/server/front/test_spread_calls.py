"""The front's calls on a spread partitioned topic against stand-in slots: real gRPC
servers on loopback that answer as a slot does (its partitions only) and record what
they were asked (``server/front/spread/log.py``)."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from compactlog.partitioner import partition_name
from compactlog.server.front.secret import FRONT_KEY
from compactlog.storage.slots import Placement, slot_of
from compactlog.v1 import compactlog_pb2 as pb
from tests.server.front.slots import LOG, NAME, PARTITIONS, SECRET, Slot, msg, read, with_front


def test_read_merges_every_slot_each_partition_in_order() -> None:
    async def scenario(channel: grpc.aio.Channel, slots: dict[int, Slot]) -> None:
        got = [m.id for r in [r async for r in read(channel)] for m in r.messages]
        for i in range(PARTITIONS):
            assert [m.entry_id for m in got if m.partition == i] == list(range(6))
        for slot in slots.values():
            _method, _request, metadata = slot.asked[0]
            assert metadata[FRONT_KEY] == SECRET and metadata["x-custom"] == "1"

    asyncio.run(with_front(scenario))


def test_read_shares_max_messages_and_cuts_the_last_response() -> None:
    async def scenario(channel: grpc.aio.Channel, slots: dict[int, Slot]) -> None:
        responses = [r async for r in read(channel, max_messages=5)]
        assert sum(len(r.messages) for r in responses) == 5
        assert len(responses[-1].messages) == 1  # two were sent, one kept

    asyncio.run(with_front(scenario))


def test_a_name_not_in_the_index_goes_to_its_owner() -> None:
    async def scenario(channel: grpc.aio.Channel, slots: dict[int, Slot]) -> None:
        name = partition_name(NAME, 2)
        stub = channel.unary_unary(LOG + "Acknowledge")
        await stub(pb.AcknowledgeRequest(topic=name).SerializeToString())
        owner = slots[slot_of(name, 8, Placement.PARTITION)]
        assert [a[0] for a in owner.asked] == [LOG + "Acknowledge"]
        assert FRONT_KEY not in owner.asked[0][2]

    asyncio.run(with_front(scenario))


def test_acks_go_to_the_slot_of_their_partition() -> None:
    async def scenario(channel: grpc.aio.Channel, slots: dict[int, Slot]) -> None:
        by_partition = {slot.partition: slot for slot in slots.values()}
        ack = pb.AcknowledgeRequest(topic=NAME, id=pb.MessageId(entry_id=1, partition=3))
        await channel.unary_unary(LOG + "Acknowledge")(ack.SerializeToString())
        assert [a[0] for a in by_partition[3].asked] == [LOG + "Acknowledge"]
        ids = [pb.MessageId(entry_id=e, partition=p) for e, p in ((1, 0), (2, 1), (3, 0))]
        nack = pb.NegativeAcknowledgeRequest(topic=NAME, subscription="s", ids=ids)
        await channel.unary_unary(LOG + "NegativeAcknowledge")(nack.SerializeToString())
        sent = pb.NegativeAcknowledgeRequest.FromString(by_partition[0].asked[-1][1])
        assert [i.entry_id for i in sent.ids] == [1, 3] and sent.subscription == "s"
        sent = pb.NegativeAcknowledgeRequest.FromString(by_partition[1].asked[-1][1])
        assert [i.entry_id for i in sent.ids] == [2]
        assert not by_partition[2].asked

    asyncio.run(with_front(scenario))


@pytest.mark.parametrize("max_messages", [0, 10])
def test_consume_takes_the_first_answers_and_cancels_the_waiting(max_messages: int) -> None:
    async def scenario(channel: grpc.aio.Channel, slots: dict[int, Slot]) -> None:
        by_partition = {slot.partition: slot for slot in slots.values()}
        for slot in slots.values():
            slot.consume_delay = 30.0
        by_partition[1].consume_delay = 0.0
        by_partition[1].consume = pb.ConsumeResponse(messages=[msg(1, 0)]).SerializeToString()
        request = pb.ConsumeRequest(
            topic=NAME, subscription="s", max_messages=max_messages, wait_ms=10_000
        )
        answer = await channel.unary_unary(LOG + "Consume")(request.SerializeToString())
        assert [m.id.partition for m in pb.ConsumeResponse.FromString(answer).messages] == [1]
        await asyncio.wait_for(by_partition[0].cancelled.wait(), 5.0)
        # partition 0 was cancelled while it waited, so both rounds reached it (a slot
        # other than it may see its waiting call cancelled before it arrives)
        first, then = (pb.ConsumeRequest.FromString(a[1]) for a in by_partition[0].asked)
        assert first.max_messages == then.max_messages == (3 if max_messages else 0)
        assert (first.wait_ms, then.wait_ms) == (0, 10_000)

    asyncio.run(with_front(scenario))


def test_consume_keeps_every_answer_of_the_round_without_waiting() -> None:
    async def scenario(channel: grpc.aio.Channel, slots: dict[int, Slot]) -> None:
        for slot in slots.values():
            if slot.partition in (0, 2):
                slot.at_once = pb.ConsumeResponse(
                    messages=[msg(slot.partition, 0)]
                ).SerializeToString()
        request = pb.ConsumeRequest(topic=NAME, subscription="s", wait_ms=10_000)
        firsts = []
        for _ in range(PARTITIONS):
            answer = await channel.unary_unary(LOG + "Consume")(request.SerializeToString())
            got = [m.id.partition for m in pb.ConsumeResponse.FromString(answer).messages]
            assert sorted(got) == [0, 2]
            firsts.append(got[0])
        assert sorted(set(firsts)) == [0, 2]  # the first slot asked rotates
        assert all(len(slot.asked) == PARTITIONS for slot in slots.values())  # no waiting

    asyncio.run(with_front(scenario))
