"""``Prefetch``: one Consume ahead of the caller, so the server's work on the next batch
overlaps the application's on this one (pulsar-client's receiver queue does the same).

A consumer starts one as soon as it hands out the first message of a full response (a
full response means more is waiting; after a partial one the consumer is caught up and
asks only when the buffer is empty). The call runs on a thread of the consumer's and its response is
applied on the caller's thread when the buffer is empty, so the consumer's state is only
ever touched by its caller. Before anything that moves or releases the subscription
(``seek``, ``redeliver_unacknowledged_messages``, ``close``) the consumer waits for the
call in flight and drops its response, so the server sees that Consume before the next
request and redelivers what it had given out.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["Prefetch"]

R = TypeVar("R")


class Prefetch(Generic[R]):
    """At most one call in flight on a thread made on first use."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._ahead: concurrent.futures.Future[R] | None = None

    @property
    def pending(self) -> bool:
        return self._ahead is not None

    def start(self, call: Callable[[], R]) -> None:
        """Run ``call`` on the prefetch thread; a no-op while one is in flight."""
        if self._ahead is not None:
            return
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix=self._name)
        self._ahead = self._pool.submit(call)

    def take(self, timeout_s: float | None) -> R | None:
        """The call's result, waiting at most ``timeout_s`` (``None`` when it has not come
        by then: it stays in flight); its error is raised here."""
        ahead = self._ahead
        if ahead is None:
            return None
        try:
            result = ahead.result(timeout_s)
        except concurrent.futures.TimeoutError:
            return None
        finally:
            if ahead.done():
                self._ahead = None
        return result

    def drop(self) -> None:
        """Wait for the call in flight and forget its result and its error."""
        ahead, self._ahead = self._ahead, None
        if ahead is not None:
            with contextlib.suppress(Exception):  # the response is dropped: so is its error
                ahead.result()

    def close(self) -> None:
        self.drop()
        if self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool = None
