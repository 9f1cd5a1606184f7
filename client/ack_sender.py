"""``AckSender``: a threaded consumer's acknowledgements, grouped and sent by a thread.

``put`` queues an ack (``ack_queue.AckQueue``) and returns. As pulsar-client's core groups
them (``ackGroupingTimeMs`` 100, ``ackGroupingMaxSize`` 1000: ``ack_queue.GROUP_S`` and
``GROUP_MAX``), the sender thread waits up to 100 ms after the first ack of a group, or
until 1,000 acks are queued, and then sends what is queued, every request of it at once
(gRPC futures: the server stores them with one group commit): a cumulative ack each, the
individual acks as AcknowledgeList requests (one cursor write each; ``ack_queue`` says how
a refused list or an older server is handled), and the next group once those are answered.
``flush`` sends what is queued at once, waits until it is answered and raises a failure the
server answered; the consumer calls it before anything that must come after its acks (seek,
redelivery, negative acks, close).
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import grpc

from compactlog.client.ack_queue import AckQueue, Failed, Queued, list_requests, refused_lists
from compactlog.client.errors import call
from compactlog.client.message import wire_ids
from compactlog.errors import CompactlogError
from compactlog.v1 import compactlog_pb2 as pb

__all__ = ["AckSender"]

# One call of a Log method (Acknowledge, AcknowledgeList) sent now (its ``grpc.Future``),
# and one sent and waited for.
Request = pb.AcknowledgeRequest | pb.AcknowledgeListRequest
Start = Callable[[str, Request], Any]
Send = Callable[[str, Request], object]
R = TypeVar("R", pb.AcknowledgeRequest, pb.AcknowledgeListRequest)


class AckSender:
    """One consumer's queued acks and the thread that sends them."""

    def __init__(
        self, start: Start, send: Send, address: str, topic: str, subscription: str
    ) -> None:
        self._start = start
        self._send = send
        self._address = address
        self._topic = topic
        self._subscription = subscription
        self.queue = AckQueue()
        self._lock = threading.Condition(threading.Lock())  # never taken twice
        self._busy = False  # the thread holds a group (waiting for it to fill, or sending)
        self._urgent = 0  # callers of flush waiting: what is queued goes now
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self.lists = True  # the server has AcknowledgeList (False once it said UNIMPLEMENTED)

    def put(self, mid: Queued, cumulative: bool) -> None:
        """Queue an ack; the sender thread starts on it unless it is running already
        (and is woken when the group is full)."""
        with self._lock:
            self.queue.put(mid, cumulative)
            if not self._busy:
                self.queue.lost = None  # a lost server: try again now
                self._start_drain()
            elif self.queue.full():
                self._lock.notify_all()

    def _start_drain(self) -> None:
        self._busy = True  # under the lock
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="ack")
        self._pool.submit(self._drain)

    def _drain(self) -> None:
        """Send group after group until the queue is empty, or the server is lost (what
        could not reach it stays queued for the next ``put`` or ``flush``)."""
        try:
            while True:
                with self._lock:
                    self._wait_group()
                    if not self.queue or self.queue.lost is not None:
                        return
                    cumulative, single = self.queue.take()
                answers = self._send_all(cumulative, True) + self._send_lists(single)
                with self._lock:
                    for mid, cumulative_ack, exc in answers:
                        self.queue.answered(mid, cumulative_ack, exc)
        finally:
            with self._lock:
                self._busy = False
                self._lock.notify_all()

    def _wait_group(self) -> None:
        """Under the lock: until the group's time is up, it is full, or a flush asks."""
        queue = self.queue
        while queue and queue.lost is None and not self._urgent and not queue.full():
            left = queue.due - time.monotonic()
            if left <= 0:
                return
            self._lock.wait(left)

    def _send_all(self, ids: list[pb.MessageId], cumulative: bool) -> Failed:
        """One Acknowledge an id, every request at once, then every answer. The failures."""
        topic, sub = self._topic, self._subscription
        reqs = [
            pb.AcknowledgeRequest(topic=topic, subscription=sub, id=mid, cumulative=cumulative)
            for mid in ids
        ]
        failed = []
        for req, error in self._answers("Acknowledge", reqs):
            failed.append((req.id, cumulative, error))
        return failed

    def _send_lists(self, queued: list[Queued]) -> Failed:
        """Individual acks as AcknowledgeList requests; the ids of a list the server
        refused (or could not take) one Acknowledge each, so each gets its own answer.
        The failures."""
        if not self.lists:
            return self._send_all(wire_ids(queued), False)
        reqs = list_requests(self._topic, self._subscription, queued)
        failed, singles, unimplemented = refused_lists(self._answers("AcknowledgeList", reqs))
        if unimplemented:
            self.lists = False  # an older server: one Acknowledge an id from now on
        return failed + (self._send_all(singles, False) if singles else [])

    def _answers(self, method: str, reqs: Sequence[R]) -> list[tuple[R, CompactlogError]]:
        """Every request at once, then every answer; a request that failed is sent once
        more on its own (acks are idempotent; that path follows a topic that moved). The
        requests that failed, with their errors."""
        failed = []
        for req, future in [(req, self._start(method, req)) for req in reqs]:
            try:
                future.result()
            except grpc.RpcError:
                try:
                    call(method, self._address, lambda: self._send(method, req))  # noqa: B023
                except CompactlogError as exc:
                    failed.append((req, exc))
        return failed

    def flush(self) -> None:
        """Send what is queued now and wait until it is stored. Raises a failure the
        server answered, or, when acks could not reach the server (they stay queued),
        the reason."""
        with self._lock:
            self._urgent += 1
            try:
                self._lock.notify_all()
                while self._busy:
                    self._lock.wait()
                if self.queue.failure is None and self.queue.lost is not None:
                    self.queue.lost = None  # one more try now
                    self._start_drain()
                    while self._busy:
                        self._lock.wait()
            finally:
                self._urgent -= 1
            self.queue.check()

    def close(self) -> None:
        """``flush``, then let the thread go."""
        try:
            self.flush()
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=False)
                self._pool = None
