"""``AckTask``: an asyncio consumer's acknowledgements, sent by a task of its own.

The asyncio twin of ``client.ack_sender``, over the same ``ack_queue.AckQueue``: ``put``
queues an ack and returns; one task waits for the group as pulsar-client does (100 ms after
its first ack, or 1,000 acks queued: ``ack_queue.GROUP_S`` and ``GROUP_MAX``), sends it,
every request at once (the server stores them with one group commit; the individual acks as
AcknowledgeList requests, with the fallbacks ``ack_queue`` describes), then the next group,
until nothing is left. ``flush`` sends what is queued at once, waits for it and raises a
failure the server answered.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeVar

import grpc

from compactlog.client.ack_queue import AckQueue, Failed, Queued, list_requests, refused_lists
from compactlog.client.errors import from_rpc_error
from compactlog.client.message import wire_ids
from compactlog.errors import CompactlogError
from compactlog.v1 import compactlog_pb2 as pb

if TYPE_CHECKING:
    from compactlog.client.aio.link import Link

__all__ = ["AckTask"]

R = TypeVar("R", pb.AcknowledgeRequest, pb.AcknowledgeListRequest)


class AckTask:
    """One consumer's queued acks and the task that sends them."""

    def __init__(self, link: Link, topic: str, subscription: str) -> None:
        self._link = link
        self._topic = topic
        self._subscription = subscription
        self.queue = AckQueue()
        self._task: asyncio.Task[None] | None = None
        self._urgent = 0  # flushes waiting: what is queued goes now
        self._wake = asyncio.Event()  # the group is full, or a flush asks
        self.lists = True  # the server has AcknowledgeList (False once it said UNIMPLEMENTED)

    def put(self, mid: Queued, cumulative: bool) -> None:
        """Queue an ack; the task starts on it unless it is running already (and is woken
        when the group is full)."""
        self.queue.put(mid, cumulative)
        if self._task is None or self._task.done():
            self._start_drain()
        elif self.queue.full():
            self._wake.set()

    def _start_drain(self) -> None:
        self.queue.lost = None  # a lost server: try again now
        self._task = asyncio.ensure_future(self._drain())

    async def _drain(self) -> None:
        """As ``AckSender._drain``: until the queue is empty or the server is lost."""
        while self.queue and self.queue.lost is None:
            await self._wait_group()
            cumulative, single = self.queue.take()
            answers = await asyncio.gather(
                self._send_all(cumulative, True), self._send_lists(single)
            )
            for mid, cumulative_ack, exc in answers[0] + answers[1]:
                self.queue.answered(mid, cumulative_ack, exc)

    async def _wait_group(self) -> None:
        """Until the group's time is up, it is full, or a flush asks."""
        queue = self.queue
        while not self._urgent and not queue.full():
            left = queue.due - time.monotonic()
            if left <= 0:
                return
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), left)
            except TimeoutError:
                return

    async def _send_all(self, ids: list[pb.MessageId], cumulative: bool) -> Failed:
        """One Acknowledge an id, every request at once; the failures among their answers."""
        topic, sub = self._topic, self._subscription
        reqs = [
            pb.AcknowledgeRequest(topic=topic, subscription=sub, id=mid, cumulative=cumulative)
            for mid in ids
        ]
        return [(req.id, cumulative, exc) for req, exc in await self._answers("Acknowledge", reqs)]

    async def _send_lists(self, queued: list[Queued]) -> Failed:
        """As ``AckSender._send_lists``: AcknowledgeList requests, and the ids of one the
        server refused one Acknowledge each."""
        if not self.lists:
            return await self._send_all(wire_ids(queued), False)
        reqs = list_requests(self._topic, self._subscription, queued)
        answers = await self._answers("AcknowledgeList", reqs)
        failed, singles, unimplemented = refused_lists(answers)
        if unimplemented:
            self.lists = False  # an older server: one Acknowledge an id from now on
        return failed + (await self._send_all(singles, False) if singles else [])

    async def _answers(self, method: str, reqs: Sequence[R]) -> list[tuple[R, CompactlogError]]:
        """Every request at once; those whose answer is a failure, with it."""
        answers = await asyncio.gather(
            *(self._send(method, req) for req in reqs), return_exceptions=True
        )
        failed = []
        for req, answer in zip(reqs, answers, strict=True):
            if isinstance(answer, CompactlogError):
                failed.append((req, answer))
            elif isinstance(answer, BaseException):
                raise answer
        return failed

    async def _send(self, method: str, req: R) -> None:
        link = self._link
        try:
            await getattr(link.stub, method)(req, timeout=link.timeout, metadata=link.metadata)
        except grpc.RpcError as err:
            raise from_rpc_error(err, method, link.address) from None

    async def flush(self) -> None:
        """As ``AckSender.flush``: what is queued sent now, every queued ack stored, or
        why not."""
        self._urgent += 1
        self._wake.set()
        try:
            if self._task is not None:
                await asyncio.shield(self._task)
            if self.queue.failure is None and self.queue.lost is not None:
                self._start_drain()  # one more try now
                await asyncio.shield(self._task)  # type: ignore[arg-type]
        finally:
            self._urgent -= 1
        self.queue.check()
