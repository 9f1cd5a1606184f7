"""Readers waiting for new data, woken by appends: no polling, no thread per waiter.

The stores announce every change of a topic (an append became visible, the topic was
deleted, the store closed) through their ``ChangeListeners``, on whatever thread made
it. ``TopicSignals.notify`` hands that to the event loop; each topic has one future that
every waiter of that topic awaits, resolved and replaced on each change.

No wake-up is lost: a waiter takes the topic's future *before* it looks for data, and a
writer makes data visible *before* it notifies; so either the look finds the data or the
notification finds the future.
"""

from __future__ import annotations

import asyncio


class TopicSignals:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._futures: dict[str, asyncio.Future[None]] = {}
        self.stopping = asyncio.Event()  # set by ``stop``: every wait ends

    def notify(self, name: str) -> None:
        """From any thread: wake the waiters of ``name``."""
        if name in self._futures:
            self._loop.call_soon_threadsafe(self._fire, name)

    def _fire(self, name: str) -> None:
        future = self._futures.pop(name, None)
        if future is not None and not future.done():
            future.set_result(None)

    def stop(self) -> None:
        """Shutdown: wake every waiter now and every later one at once."""
        self.stopping.set()
        for name in list(self._futures):
            self._fire(name)

    def next_change(self, name: str) -> asyncio.Future[None]:
        """The future the next change of ``name`` resolves (take it before looking)."""
        future = self._futures.get(name)
        if future is None:
            future = self._loop.create_future()
            if self.stopping.is_set():
                future.set_result(None)
            else:
                self._futures[name] = future
        return future

    async def wait(
        self,
        change: asyncio.Future[None],
        timeout: float | None = None,
        stop: asyncio.Future[None] | None = None,
    ) -> bool:
        """Wait for ``change``, the timeout or ``stop`` (the waiter's own end); True when
        the change came (not shutdown).

        The future is shared by every waiter of the topic, so it is waited on, never
        cancelled: ``asyncio.wait`` leaves it alone on a timeout and when this waiter
        is cancelled. A waiter costs no task of its own."""
        if not change.done():
            waited = (change,) if stop is None else (change, stop)
            await asyncio.wait(waited, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        return change.done() and not self.stopping.is_set()
