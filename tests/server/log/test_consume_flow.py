"""A ConsumeStream's permits (``consume_stream.Flow``): the stream's wait for them.

A consumer that takes each response whole (``batch_receive``) runs its stream out of
permits once a response, so the wait is on the stream's path for every response: it
must end on the flow that brings permits, or on the consumer's end, and cost one future,
not a task and an ``asyncio.wait`` of its own.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from compactlog.server.log.consume_stream import Flow
from compactlog.v1 import compactlog_pb2 as pb


async def _flows(queue: asyncio.Queue[pb.ConsumeFlow | None]) -> AsyncIterator[pb.ConsumeFlow]:
    while (flow := await queue.get()) is not None:
        yield flow


async def _waits() -> list[tuple[int, int, bool]]:
    """(permits, tasks alive while waiting, ended) after each of: a flow of 5 permits
    given while the stream waits, then the consumer's side ending while it waits."""
    queue: asyncio.Queue[pb.ConsumeFlow | None] = asyncio.Queue()
    flow = Flow()
    reader = asyncio.ensure_future(flow.read(_flows(queue)))
    out = []
    for given in (pb.ConsumeFlow(permits=5), None):
        waiting = asyncio.ensure_future(flow.wait())
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert not waiting.done()  # no permits yet: it waits
        tasks = len(asyncio.all_tasks())
        await queue.put(given)
        await asyncio.wait_for(waiting, 5)
        out.append((flow.permits, tasks, flow.ended.done()))
        flow.take(flow.permits)
    await reader
    return out


def test_the_wait_ends_on_permits_and_on_the_end_with_no_task_of_its_own() -> None:
    # Alive while waiting: this test, the flow reader and the waiting call alone.
    assert asyncio.run(_waits()) == [(5, 3, False), (0, 3, True)]
