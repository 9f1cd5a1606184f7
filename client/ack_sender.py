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

The same thread carries the tick of the consumer's ack timeout (``unacked_tracker``), so
a consumer with ``unacked_messages_timeout_ms`` holds no thread more: while the tracker
holds ids it also waits for their tick, and sends back what ran out (after the group it
was sending, if any), ending once nothing is queued or timed. ``flush`` waits for the
queue, not for the thread.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import grpc

from compactlog.client.ack_queue import (
    GROUP_S,
    AckQueue,
    Failed,
    Queued,
    list_requests,
    refused_lists,
)
from compactlog.client.errors import call
from compactlog.client.message import wire_ids
from compactlog.client.unacked_tracker import UnackedTracker
from compactlog.errors import CompactlogError
from compactlog.v1 import compactlog_pb2 as pb

__all__ = ["AckSender"]

# One call of a Log method (Acknowledge, AcknowledgeList) sent now (its ``grpc.Future``),
# and one sent and waited for.
Request = pb.AcknowledgeRequest | pb.AcknowledgeListRequest
Start = Callable[[str, Request], Any]
Send = Callable[[str, Request], object]
# Ids whose ack timeout ran out, sent back for redelivery (the consumer's call).
SendBack = Callable[[list[pb.MessageId]], None]
R = TypeVar("R", pb.AcknowledgeRequest, pb.AcknowledgeListRequest)


class AckSender:
    """One consumer's queued acks and the thread that sends them (and carries its ack
    timeout's tick, when it has one)."""

    def __init__(
        self,
        start: Start,
        send: Send,
        address: str,
        topic: str,
        subscription: str,
        tracker: UnackedTracker | None = None,
        send_back: SendBack | None = None,
    ) -> None:
        self._start = start
        self._send = send
        self._address = address
        self._topic = topic
        self._subscription = subscription
        self._tracker = tracker
        self._send_back = send_back
        self.queue = AckQueue()
        self._lock = threading.Condition(threading.Lock())  # never taken twice
        self._busy = False  # the thread runs (waiting for a group or a tick, or sending)
        self._sending = False  # a group taken from the queue is on its way
        self._closed = False  # no more ticks: the thread ends once the queue is sent
        self._urgent = 0  # callers of flush waiting: what is queued goes now
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self.lists = True  # the server has AcknowledgeList (False once it said UNIMPLEMENTED)

    def put(self, mid: Queued, cumulative: bool) -> None:
        """Queue an ack; the sender thread starts on it unless it is running already
        (and is woken when a group begins, is full, or lost acks may go again)."""
        with self._lock:
            queue = self.queue
            due = queue.due  # a new group sets it: attribute reads only, on every ack
            queue.put(mid, cumulative)
            if not self._busy:
                queue.lost = None  # a lost server: try again now
                self._start_drain()
            elif queue.lost is not None and not self._sending:  # the thread waits a tick
                queue.lost = None
                self._lock.notify_all()
            elif queue.due != due or queue.full():
                self._lock.notify_all()

    def watch(self) -> None:
        """The ack timeout's tracker holds ids now (it held none): the thread waits for
        their tick, started if it was not running. A running thread needs no wake (an
        ack-each loop empties the tracker every message: no context switch for it): it
        waits for a group, due within ``GROUP_S``, or for the tick of ids handed out
        earlier, no later than the new ones' tick; only a timeout shorter than a group's
        wait may fall before it."""
        with self._lock:
            tracker = self._tracker
            self._wake(tracker is not None and tracker.timeout_s < GROUP_S)

    def _wake(self, notify: bool) -> None:
        """Under the lock: the thread started, or woken when ``notify``."""
        if not self._busy:
            self._start_drain()
        elif notify:
            self._lock.notify_all()

    def _start_drain(self) -> None:
        self._busy = True  # under the lock
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="ack")
        self._pool.submit(self._drain)

    def _drain(self) -> None:
        """Send group after group, and what the ack timeout sends back at each tick,
        until nothing is queued (or the server is lost: what could not reach it stays
        queued for the next ``put`` or ``flush``) and nothing is timed."""
        try:
            while self._step():
                pass
        except BaseException:
            with self._lock:
                self._busy = self._sending = False
                self._lock.notify_all()
            raise

    def _step(self) -> bool:
        """One group sent and one tick's ids sent back, once either is due; False (the
        thread is no longer busy) when there is nothing left to wait for."""
        with self._lock:
            if not self._wait():
                self._busy = False
                self._lock.notify_all()
                return False
            group = self.queue.take() if self._group_goes() else None
            self._sending = group is not None
        if group is not None:
            cumulative, single = group
            answers = self._send_all(cumulative, True) + self._send_lists(single)
            with self._lock:
                for mid, cumulative_ack, exc in answers:
                    self.queue.answered(mid, cumulative_ack, exc)
                self._sending = False
                self._lock.notify_all()
        if self._tracker is not None and self._send_back is not None and not self._closed:
            expired = self._tracker.expire()
            if expired:
                self._send_back(expired)
        return True

    def _group_goes(self) -> bool:
        """Under the lock: the queued acks go now (their time is up, the group is full,
        or a flush asks)."""
        queue = self.queue
        if not queue or queue.lost is not None:
            return False
        return bool(self._urgent) or queue.full() or queue.due <= time.monotonic()

    def _wait(self) -> bool:
        """Under the lock: until the group goes or the tracker's tick is due (True), or
        False at once when neither is waited for."""
        queue = self.queue
        while not self._group_goes():
            acks = queue.due if queue and queue.lost is None else None
            tracker = None if self._closed else self._tracker
            tick = tracker.due() if tracker is not None else None
            now = time.monotonic()
            if tick is not None and tick <= now:
                return True
            wakes = [at for at in (acks, tick) if at is not None]
            if not wakes:
                return False
            self._lock.wait(min(wakes) - now)
        return True

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
                self._wait_sent()
                if self.queue.failure is None and self.queue.lost is not None:
                    self.queue.lost = None  # one more try now
                    self._wake(True)
                    self._wait_sent()
            finally:
                self._urgent -= 1
            self.queue.check()

    def _wait_sent(self) -> None:
        """Under the lock: until no queued ack waits to go and none is on its way."""
        queue = self.queue
        while self._sending or (self._busy and queue and queue.lost is None):
            self._lock.wait()

    def close(self) -> None:
        """No more ticks; ``flush``, then let the thread go."""
        with self._lock:
            self._closed = True
        try:
            self.flush()
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=False)
                self._pool = None
