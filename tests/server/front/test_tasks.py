"""No fan-out task of the front outlives its call (``server/front/tasks.py``): when one
slot's part fails, the caller gets that failure at once, the other parts are cancelled
and awaited, and nothing lands in the log as "Task exception was never retrieved" or a
task "destroyed but it is pending". The front is real, before stand-in slots on
loopback (``slots``)."""

from __future__ import annotations

import asyncio
import gc
import logging
import time

import grpc
import pytest

from compactlog.server.front.tasks import all_or_first_error
from compactlog.v1 import compactlog_pb2 as pb
from tests.server.front.slots import LOG, NAME, Scenario, Slot, read, with_front

LEAKS = ("never retrieved", "destroyed but it is pending", "was never awaited")


def leaks(caplog: pytest.LogCaptureFixture) -> list[str]:
    gc.collect()  # a task's unretrieved failure is reported when it is collected
    return [r.getMessage() for r in caplog.records if any(s in r.getMessage() for s in LEAKS)]


def run_leaking_nothing(caplog: pytest.LogCaptureFixture, scenario: Scenario) -> None:
    """``scenario`` before the front and its stand-in slots; no task leaked by the end."""
    caplog.set_level(logging.DEBUG, logger="asyncio")
    asyncio.run(with_front(scenario))
    assert leaks(caplog) == []


def pumps() -> list[asyncio.Task[object]]:
    """The front's tasks pumping a slot's Read stream that have not ended."""
    return [t for t in asyncio.all_tasks() if "_pump" in getattr(t.get_coro(), "__qualname__", "")]


def test_the_first_failure_cancels_and_awaits_the_other_parts(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def fails(after: float) -> bytes:
        await asyncio.sleep(after)
        raise ValueError(f"after {after}")

    async def main() -> list[asyncio.Task[object]]:
        before = asyncio.all_tasks()
        with pytest.raises(ValueError, match=r"after 0\.01"):
            await all_or_first_error([fails(0.01), fails(0.01), asyncio.sleep(30, b"x")])
        return [t for t in asyncio.all_tasks() - before if not t.done()]

    caplog.set_level(logging.DEBUG, logger="asyncio")
    assert asyncio.run(main()) == []  # none running on after the call
    assert leaks(caplog) == []


def _failing_and_hanging(slots: dict[int, Slot]) -> list[Slot]:
    """The slot of partition 1 fails; the others take 30 s: they are the ones left."""
    others = []
    for slot in slots.values():
        if slot.partition == 1:
            slot.fails = grpc.StatusCode.NOT_FOUND
        else:
            slot.hang, slot.read_delay = 30.0, 30.0
            others.append(slot)
    return others


async def cancelled_or_never_reached(slots: list[Slot]) -> None:
    """Each slot's call was cancelled while it waited, or cancelled before it reached the
    slot (the failure came first); none is left waiting out its 30 s."""
    deadline = time.monotonic() + 5.0
    while not all(slot.cancelled.is_set() or not slot.asked for slot in slots):
        assert time.monotonic() < deadline, [(s.partition, len(s.asked)) for s in slots]
        await asyncio.sleep(0.01)


@pytest.mark.parametrize("method", ["GetKeyHistory", "GetLastMessageId"])
def test_a_slot_failing_ends_a_unary_call_and_cancels_the_other_slots(
    method: str, caplog: pytest.LogCaptureFixture
) -> None:
    requests = {
        "GetKeyHistory": pb.GetKeyHistoryRequest(topic=NAME, key=b"k"),
        "GetLastMessageId": pb.GetLastMessageIdRequest(topic=NAME),
    }

    async def scenario(channel: grpc.aio.Channel, slots: dict[int, Slot]) -> None:
        others = _failing_and_hanging(slots)
        began = time.monotonic()
        with pytest.raises(grpc.aio.AioRpcError) as failed:
            await channel.unary_unary(LOG + method)(requests[method].SerializeToString())
        assert failed.value.code() == grpc.StatusCode.NOT_FOUND
        assert time.monotonic() - began < 10
        await cancelled_or_never_reached(others)

    run_leaking_nothing(caplog, scenario)


def test_a_slot_failing_ends_a_read_and_cancels_the_other_streams(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def scenario(channel: grpc.aio.Channel, slots: dict[int, Slot]) -> None:
        others = _failing_and_hanging(slots)
        with pytest.raises(grpc.aio.AioRpcError) as failed:
            _ = [r async for r in read(channel)]
        assert failed.value.code() == grpc.StatusCode.NOT_FOUND
        await cancelled_or_never_reached(others)

    run_leaking_nothing(caplog, scenario)


def test_a_read_cut_short_leaves_no_pump_waiting_on_a_full_queue(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def scenario(channel: grpc.aio.Channel, slots: dict[int, Slot]) -> None:
        for slot in slots.values():
            slot.responses, slot.read_delay = 50, 0.0
        responses = [r async for r in read(channel, max_messages=3)]
        assert sum(len(r.messages) for r in responses) == 3
        await asyncio.sleep(0.2)
        assert pumps() == []

    run_leaking_nothing(caplog, scenario)
