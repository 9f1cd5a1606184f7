"""Deadlines of the client's calls: no call waits forever (CONTRACT section 12).

A unary call takes the client's ``timeout`` as its gRPC deadline (a Consume adds the
server-side ``wait_ms`` it asked for). A stream cannot: a deadline covers a gRPC call's
whole life, and a ``follow`` read may rightly wait hours for its next message. So a
stream is watched instead, and only while the client waits for something the server owes
it at once:

- every stream's start: the server sends its initial metadata once the call is accepted
  (topic found, start position set), so a wrong address, a stuck server or a lost
  connection surfaces within ``timeout``;
- a bounded read (no ``follow``): each next response, once asked for;
- a PublishStream: each reply while a request is outstanding.

A wait past ``timeout`` cancels the call, and the caller gets ``Timeout``. One
``Watchdog`` thread per client keeps the deadlines of all its streams (started with the
first stream that needs it), so watching costs no thread per call and no timer per
response.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable

from compactlog.client.errors import Timeout


class Watchdog:
    """Calls ``on_expire`` of each armed deadline that passes; one thread for many."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int]] = []
        self._armed: dict[int, tuple[float, Callable[[], None]]] = {}
        self._ids = itertools.count()
        self._thread: threading.Thread | None = None
        self._closed = False

    def new_id(self) -> int:
        return next(self._ids)

    def arm(self, ident: int, seconds: float, on_expire: Callable[[], None]) -> None:
        """(Re)arm ``ident``: ``on_expire`` runs once ``seconds`` pass without a disarm."""
        deadline = time.monotonic() + seconds
        with self._cond:
            if self._closed:
                return
            self._armed[ident] = (deadline, on_expire)
            heapq.heappush(self._heap, (deadline, ident))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="compactlog-deadlines", daemon=True
                )
                self._thread.start()
            self._cond.notify()

    def disarm(self, ident: int) -> None:
        with self._cond:
            self._armed.pop(ident, None)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._armed.clear()
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                expired = self._next_expired()
                if expired is None:
                    return
            expired()  # outside the lock: it cancels a call, whose callbacks may re-arm

    def _next_expired(self) -> Callable[[], None] | None:
        """Wait (holding the condition) for the earliest live deadline to pass."""
        while not self._closed:
            if not self._heap:
                self._cond.wait()
                continue
            deadline, ident = self._heap[0]
            armed = self._armed.get(ident)
            if armed is None or armed[0] != deadline:  # disarmed or re-armed later
                heapq.heappop(self._heap)
                continue
            left = deadline - time.monotonic()
            if left > 0:
                self._cond.wait(left)
                continue
            heapq.heappop(self._heap)
            del self._armed[ident]
            return armed[1]
        return None


class StreamWatch:
    """The deadline of one stream's current wait; expiry cancels the call."""

    def __init__(
        self,
        watchdog: Watchdog | None,
        timeout: float | None,
        cancel: Callable[[], None],
        what: str,
    ) -> None:
        self._watchdog = watchdog if timeout is not None else None
        self._timeout = timeout or 0.0
        self._cancel = cancel
        self._what = what
        self._id = watchdog.new_id() if watchdog is not None else 0
        self.expired = False

    def arm(self) -> None:
        """Start (or restart) the wait's clock."""
        if self._watchdog is not None:
            self._watchdog.arm(self._id, self._timeout, self._expire)

    def disarm(self) -> None:
        if self._watchdog is not None:
            self._watchdog.disarm(self._id)

    def _expire(self) -> None:
        self.expired = True
        self._cancel()

    def timeout_error(self) -> Timeout:
        return Timeout(f"{self._what}: no answer from the server within {self._timeout:g} s")
